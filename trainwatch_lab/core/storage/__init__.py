"""Disks and filesystems: /proc/diskstats rates, block devices, the mount table and what
each mount is (local, shared, FUSE), free space as df counts it, quotas, the fill model
and the probe that times a write+fsync.

Imports core's top modules and the guard (calls that can hang go through it).
"""
