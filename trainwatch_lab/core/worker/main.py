"""The helper process that does every call which can touch a mount.

Run as ``python -m trainwatch_lab.core.worker.main`` by core.guard.guard, one per mount. It reads
one
JSON request per line on stdin and answers one JSON line on stdout. Why a separate process:
a ``statvfs`` on a network mount whose server stopped answering sleeps uninterruptibly; a
thread stuck like that can never be reclaimed, and a process with such a thread cannot even
exit. A helper process can at least be abandoned while the caller carries on.

The operations live in core.worker.ops (looks at a mount) and core.worker.files (user
files for fix/ and the export); this module is the protocol.

Protocol: on start the worker writes ``{"ready": true, "pid": N}``; then for each
``{"id": I, "op": NAME, "args": {...}}`` it writes ``{"id": I, "ok": true, "result": ...}`` or
``{"id": I, "ok": false, "error": {"type", "errno", "strerror", "filename", "message"}}``.
It exits on EOF, SIGTERM or SIGINT; the latter two raise inside the running operation, so a
probe's ``finally`` still removes its temporary file.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

from .. import hostfs
from .files import (
    op_claim_share,
    op_copy_ranges,
    op_digests,
    op_release_share,
    op_tree,
    op_write_text,
)
from .ops import (
    error_fields,
    op_clean_leftovers,
    op_file_sizes,
    op_inspect,
    op_ping,
    op_probe,
    op_quota,
    op_scan_checkpoints,
    op_sleep,
    op_statvfs,
    op_written_since,
)
from .saves import (
    op_commit,
    op_copy_in,
    op_discard_partials,
    op_make_partial,
    op_remove,
    op_saves,
    tree_bytes,
)

OPS: dict[str, Callable[..., Any]] = {
    "ping": op_ping,
    "sleep": op_sleep,
    "statvfs": op_statvfs,
    "inspect": op_inspect,
    "scan_checkpoints": op_scan_checkpoints,
    "written_since": op_written_since,
    "file_sizes": op_file_sizes,
    "probe": op_probe,
    "clean_leftovers": op_clean_leftovers,
    "write_text": op_write_text,
    "copy_ranges": op_copy_ranges,
    "tree": op_tree,
    "saves": op_saves,
    "commit": op_commit,
    "remove": op_remove,
    "digests": op_digests,
    "claim_share": op_claim_share,
    "release_share": op_release_share,
    "make_partial": op_make_partial,
    "copy_in": op_copy_in,
    "discard_partials": op_discard_partials,
    "quota": op_quota,
    "tree_bytes": tree_bytes,
}


def handle(line: str) -> dict[str, Any]:
    rid = None
    try:
        req = json.loads(line)
        rid = req.get("id")
        fn = OPS[req["op"]]
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        return {"id": rid, "ok": False, "error": {"type": "BadRequest", "message": repr(exc)}}
    try:
        # paths under a host's rootfs resolved inside it (core.hostfs), here where a look
        # at the filesystem may hang
        args = hostfs.resolved_args(req.get("args", {}))
        return {"id": rid, "ok": True, "result": fn(**args)}
    except Exception as exc:  # reported to the caller, the worker stays up
        return {"id": rid, "ok": False, "error": error_fields(exc)}


def _terminate(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def main() -> int:
    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGINT, _terminate)
    out = sys.stdout
    out.write(json.dumps({"ready": True, "pid": os.getpid()}) + "\n")
    out.flush()
    # Start-up errors went to the guard through stderr; from now on errors travel in the
    # answers, and stray output (warnings) must not fill a pipe nobody reads until we die.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    os.close(devnull)
    for line in sys.stdin:
        if not line.strip():
            continue
        out.write(json.dumps(handle(line)) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (SystemExit, KeyboardInterrupt, BrokenPipeError):
        os._exit(0)  # parent gone or told us to stop: nothing left to report
