"""What the dashboard remembers per notebook: whether its details are open.

Why a small file keyed by the notebook's path, not the notebook's metadata or a widget
trait: the kernel cannot read or write the notebook document (only the frontend can), and
widget state saved in the notebook is restored into the *old* widget, never into the new
one that ``%trainwatch`` makes when the notebook runs again. The Jupyter server gives every
kernel its notebook's path (``JPY_SESSION_NAME``, also IPython's ``__session__``), which
survives kernel restarts and reruns: so the state is kept under that path in
``$XDG_STATE_HOME/trainwatch-lab/dashboard.json`` (``~/.local/state/...``), at most
``MAX_NOTEBOOKS`` entries, newest kept.

The file is only touched on a local disk (a home directory on a share that stopped answering
must never hang the cell); elsewhere the state lives as long as the kernel. Reads and writes
never raise: a lost preference costs one click.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from ...core.atomic_write import write_atomically

MAX_NOTEBOOKS = 200
_LOCAL_KINDS = ("local", "memory", "overlay")
_lock = threading.Lock()
_memory: dict[str, dict[str, Any]] = {}


def notebook_key() -> str | None:
    """The notebook this kernel serves (None outside a Jupyter session: nothing to key on)."""
    return os.environ.get("JPY_SESSION_NAME") or None


def state_file() -> Path:
    base = os.environ.get("TRAINWATCH_LAB_STATE_DIR")
    if base:
        return Path(base) / "dashboard.json"
    xdg = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local/state")
    return Path(xdg) / "trainwatch-lab" / "dashboard.json"


def _on_local_disk(path: Path) -> bool:
    """Decided from the mount table alone: no syscall touches ``path``."""
    try:
        from ...core.storage.mounts import classify, mount_for_path, read_mounts

        return classify(mount_for_path(str(path), read_mounts())) in _LOCAL_KINDS
    except Exception:
        return False


def _read_all(path: Path) -> dict[str, dict[str, Any]]:
    try:
        data = json.loads(path.read_text())
        notebooks = data.get("notebooks", {}) if isinstance(data, dict) else {}
        return {k: v for k, v in notebooks.items() if isinstance(v, dict)}
    except (OSError, ValueError):
        return {}


def load(key: str | None = None) -> dict[str, Any]:
    """The remembered state of notebook ``key`` (default: this kernel's notebook)."""
    key = key or notebook_key()
    if key is None:
        return {}
    with _lock:
        if key in _memory:
            return dict(_memory[key])
    path = state_file()
    found = _read_all(path).get(key, {}) if _on_local_disk(path) else {}
    with _lock:
        _memory.setdefault(key, dict(found))
        return dict(_memory[key])


def save(values: dict[str, Any], key: str | None = None) -> threading.Thread | None:
    """Remember ``values`` for notebook ``key``; the file is written on a thread (returned,
    so a test can join it), never on the caller's."""
    key = key or notebook_key()
    if key is None:
        return None
    with _lock:
        entry = _memory.setdefault(key, {})
        entry.update(values, t=time.time())
        snapshot = dict(entry)
    path = state_file()
    if not _on_local_disk(path):
        return None
    thread = threading.Thread(
        target=_write, args=(path, key, snapshot), name="trainwatch-prefs", daemon=True
    )
    thread.start()
    return thread


def _write(path: Path, key: str, entry: dict[str, Any]) -> None:
    with _lock, contextlib.suppress(OSError):
        notebooks = _read_all(path)
        notebooks[key] = entry
        newest = sorted(notebooks.items(), key=lambda kv: -float(kv[1].get("t", 0)))
        text = json.dumps({"notebooks": dict(newest[:MAX_NOTEBOOKS])}, indent=1)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(str(path), text.encode(), mode=0o600, durable=False)


def forget_memory() -> None:
    """Drop what this process remembers (tests: as if the kernel restarted)."""
    with _lock:
        _memory.clear()
