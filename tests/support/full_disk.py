"""A small disk that a training loop fills, and a webhook that hears it (issue 38's tests:
tests/fix/test_full_disk_training.py, tests/integrations/test_lightning_full_disk.py)."""

from __future__ import annotations

import json
import os
import queue
import textwrap
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

MIB = 1024 * 1024
SAVE_BYTES = 2 * MIB  # Linear(512, 1024): 2 MiB of weights and a 4 KiB bias
CHILD_TIMEOUT_S = 240

CHECK = textwrap.dedent(
    """
    import json, sys, torch
    print(json.dumps({p: torch.load(p)["epoch"] for p in sys.argv[1:]}))
    """
)


class Webhook:
    """A real webhook on 127.0.0.1: every POST body lands on ``bodies``."""

    def __init__(self) -> None:
        self.bodies: queue.Queue[dict[str, Any]] = queue.Queue()
        bodies = self.bodies

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # http.server's name
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                bodies.put(json.loads(raw))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def small_disk(loop_ext4) -> tuple[Path, Path]:
    """A 32 MiB ext4 whose free space, after a filler, holds 2.5 saves: the 3rd dies."""
    m = loop_ext4(size_mb=32)
    ckpt = m.path / "ckpt"
    ckpt.mkdir()
    free = os.statvfs(m.path).f_bavail * os.statvfs(m.path).f_frsize
    filler = m.path / "old-dataset.bin"
    with open(filler, "wb") as fh:
        fh.write(b"d" * (free - int(2.5 * SAVE_BYTES)))
        os.fsync(fh.fileno())
    return ckpt, filler
