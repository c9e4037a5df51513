"""Run code in a kernel over ZMQ, as ``jupyter console --existing`` would: a client that is no
browser (the Jupyter server counts no WebSocket for it). The client runs in a process of its
own: jupyter_client's blocking client runs an event loop, which a test's running loop (the
Jupyter server's, under pytest-jupyter) forbids in its process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CLIENT = """
import sys
from jupyter_client import BlockingKernelClient
client = BlockingKernelClient(connection_file=sys.argv[1])
client.load_connection_file()
client.start_channels()
client.wait_for_ready(timeout=60)
def keep(msg):
    if msg["msg_type"] == "stream":
        sys.stdout.write(msg["content"]["text"])
    elif msg["msg_type"] == "error":
        sys.stdout.write("\\n".join(msg["content"]["traceback"]))
client.execute_interactive(sys.argv[2], output_hook=keep, timeout=150)
client.stop_channels()
"""


def kernel_says(connection_file: str | Path, code: str) -> str:
    """What ``code`` printed in the kernel of ``connection_file`` (its error, when it raised)."""
    out = subprocess.run(
        [sys.executable, "-c", CLIENT, str(connection_file), code],
        capture_output=True,
        text=True,
        timeout=180,
    )
    return (out.stdout + out.stderr).strip()
