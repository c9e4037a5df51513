"""Our log lines in a notebook: under the running cell as plain text, never on stderr.

JupyterLab turns every path-like word of a stderr output into a link, and asks the server
whether each names a file (``GET /api/resolvePath``). Our notices name shares by design ("the
mirror of /mnt/share/runs/exp1: no answer within 2.0 s"), and most often exactly when the
share hangs, so each would send the front end to look at a path we know not to answer
(issue 34). A ``display_data`` of ``text/plain`` is shown as it is, so the kernel's logger for
``trainwatch_lab`` publishes there, under the running cell (inline.CellTracker); with no cell
running the line goes to the kernel's own stderr, which the Jupyter server logs and no
notebook shows.
"""

from __future__ import annotations

import logging
import sys

from .inline import CellTracker, Publish

LOGGER = "trainwatch_lab"


class CellLogHandler(logging.Handler):
    def __init__(self, tracker: CellTracker, publish: Publish | None) -> None:
        super().__init__(logging.WARNING)
        self.tracker, self.publish = tracker, publish
        self._propagated = True

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
            parent = self.tracker.parent
            shown = parent is not None and self.publish is not None
            if shown and self.publish({"text/plain": line}, parent, None, False):
                return
            out = sys.__stderr__
            if out is not None:
                out.write(line + "\n")
                out.flush()
        except Exception:
            self.handleError(record)

    def install(self) -> None:
        logger = logging.getLogger(LOGGER)
        self._propagated = logger.propagate
        logger.addHandler(self)
        logger.propagate = False  # not also to the root logger's stderr

    def uninstall(self) -> None:
        logger = logging.getLogger(LOGGER)
        logger.removeHandler(self)
        logger.propagate = self._propagated
