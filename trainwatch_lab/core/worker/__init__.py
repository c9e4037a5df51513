"""The guard's helper process (``python -m trainwatch_lab.core.worker.main``): the
operations it runs for the guard (ops: look at a path, probe, quotas; files: mirror copies,
digests, locks; saves: checkpoint saves staged and put in place).

The top room of core: imports storage and paths (what it runs), never imported by them.
"""
