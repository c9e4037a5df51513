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
]
WARNING_KEYS = ["code", "severity", "subject", "message", "fix"]
PROBE_KEYS = ["p50_ms", "p99_ms", "samples"]
VERDICTS = {"ok", "shared", "slow", "unresponsive", "missing"}
SEVERITIES = {"info", "warning", "critical"}
