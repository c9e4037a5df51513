"""One watcher per machine (issue 33): what a kernel needs to read its Jupyter server's
sampler instead of running its own. ``wire``: the socket's name, address and peer check,
shared with server.attach; ``link``: the kernel's connection; ``source``: the sampler source
that fills a kernel's samples from the server's.

Imports only core's top modules, paths (names) and guard (the cell's file listing)."""
