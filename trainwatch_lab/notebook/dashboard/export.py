"""The dashboard's CSV export: the retained history written through the mount guard
(export.py, never ``open()`` in the kernel) on a thread of its own, the outcome shown in the
status line beside the button."""

from __future__ import annotations

import os
import threading
import time
from typing import TYPE_CHECKING

from ...core.history import History
from ...core.paths.names import normalise
from ..export import ExportError, write_file
from ..warnings_html import esc

if TYPE_CHECKING:  # pragma: no cover
    from ipywidgets import HTML


def export_history(
    history: History,
    status: HTML,
    path: str | os.PathLike[str] | None = None,
    wait: bool = False,
    timeout: float | None = None,
) -> str:
    """Write ``history`` as CSV to ``path`` (a timestamped name in the working directory by
    default); ``status`` (an HTML widget) says what happened. Returns the file's path;
    ``wait=True`` also raises ExportError (one line) when the file was not written."""
    target = normalise(path or f"trainwatch-{time.strftime('%Y%m%d-%H%M%S')}.csv")
    text = history.to_csv()
    rows = max(0, text.count("\n") - 1)
    status.value = f'<span class="tw-muted">writing {esc(target)} …</span>'
    failure: list[ExportError] = []

    def write() -> None:
        try:
            write_file(target, text, timeout=timeout)
        except ExportError as exc:
            failure.append(exc)
            status.value = (
                f'<span class="tw-kind-shared tw-export-failed">CSV export failed: '
                f"{esc(exc)}</span>"
            )
            return
        status.value = saved_html(target, rows)

    # bounded by the guard's timeout: this thread never blocks on the filesystem itself
    thread = threading.Thread(target=write, name="trainwatch-export", daemon=True)
    thread.start()
    if wait:
        thread.join()
        if failure:
            raise failure[0]
    return target


def saved_html(target: str, rows: int) -> str:
    """ "Saved N samples to <path>", with a download link when the file is under the working
    directory (the Jupyter file browser serves it from there)."""
    rel = os.path.relpath(target) if target.startswith(os.getcwd() + os.sep) else None
    link = f' (<a href="{esc(rel)}" download>{esc(rel)}</a>)' if rel else ""
    return (
        f'<span class="tw-export" data-path="{esc(target)}">Saved {rows} samples to '
        f"<code>{esc(target)}</code>{link}</span>"
    )
