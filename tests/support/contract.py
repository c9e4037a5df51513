"""The JSON contracts of ARCHITECTURE.md, written out once for the tests (deliberately not
imported from the package: a test must fail when the code drifts from the contract)."""

from __future__ import annotations

# `check --json` "paths" entries, in this order
CHECK_PATH_KEYS = [
    "path",
    "mountpoint",
    "fstype",
    "source",
    "device",
    "shared",
    "read_only",
    "total_bytes",
    "free_bytes",
    "probe",
    "verdict",
    "checked_at",  # a path not created yet: the ancestor that was checked (issue 10)
    "note",
    # df's numbers under watch --json's names (issue 23): free_bytes is f_bfree (the root
    # reserve included), what a user can write is avail_bytes, used_pct is df's Use%
    "avail_bytes",
    "used_bytes",
    "reserved_bytes",
    "used_pct",
]
WARNING_KEYS = ["code", "severity", "subject", "message", "fix"]
PROBE_KEYS = ["p50_ms", "p99_ms", "samples"]
# present only when a probe looked slow: how many in a row, and the local reference
# measured again at the same moment ({p50_ms, p99_ms, samples, where, device})
PROBE_EVIDENCE_KEYS = ["slow_runs", "reference"]
VERDICTS = {"ok", "shared", "slow", "unresponsive", "missing", "not-storage"}
SEVERITIES = {"info", "warning", "critical"}
