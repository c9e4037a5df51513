"""Training processes: finding them (discovery, source), their I/O rates, where their
threads wait (waits, waitlook, threadwait).

Imports core's top modules and the guard (its helpers are never counted as training).
"""
