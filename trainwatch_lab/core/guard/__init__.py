"""The guard: every call that can hang on a dead mount (stat, statvfs, a probe write) goes
to a helper process with a deadline, so a hung NFS or sshfs share never blocks the kernel's
main thread or Tornado's event loop. This package is the client side: one helper per mount
and its lanes, its restart after a hang, and the pids of the helpers (never counted as
training).

Imports only core's top modules. What the helper runs lives in core.worker.
"""
