"""``%trainwatch`` / ``%%trainwatch``: the magic, and loading and unloading the extension.

The per-kernel state behind the magic is a KernelWatch (kernel_watch.py); a ``%%trainwatch``
cell body is compiled and run by cell_run.py.

Bad input raises UsageError with one line and changes nothing: options are parsed and every
path is checked (options.py) before the running dashboard is touched; a ``%%trainwatch``
cell body is compiled before its sampler starts.
"""

from __future__ import annotations

import weakref
from typing import Any

from IPython.core.magic import Magics, line_cell_magic, magics_class

from .cell.run import compile_body
from .kernel_watch import KernelWatch
from .options import Options, help_text, parse_request, subcommand_hint
from .quick_check import path_notes

__all__ = [
    "TrainWatchMagics",
    "current",
    "load_ipython_extension",
    "state_for",
    "unload_ipython_extension",
]


# -- the magic ------------------------------------------------------------------------------

_STATES: weakref.WeakKeyDictionary[Any, KernelWatch] = weakref.WeakKeyDictionary()


def state_for(shell: Any) -> KernelWatch:
    state = _STATES.get(shell)
    if state is None:
        state = _STATES[shell] = KernelWatch(shell)
    return state


@magics_class
class TrainWatchMagics(Magics):
    @line_cell_magic
    def trainwatch(self, line: str, cell: str | None = None) -> Any:
        request = parse_request(line, cell=cell is not None)
        state = state_for(self.shell)
        if request.action == "help":  # plain text, not an error: the user asked for it
            print(help_text(), end="")
            if cell is not None:
                print("trainwatch: the cell was not run (--help)")
            return None
        if request.action == "replay":
            state.replay(request.options or Options())
            return None
        if request.action != "start":
            print(state.stop() if request.action == "stop" else state.status())
            return None
        opts = request.options or Options()
        body = None if cell is None else compile_body(self.shell, cell, f"%%trainwatch {line}")
        hint = subcommand_hint(opts)
        for note in ([hint] if hint else []) + path_notes(opts.all_paths):
            print(note)  # (paths that can never be watched were refused by parse_request)
        if body is None:
            state.start(opts)
            return None
        return state.run_cell_watched(opts, body)

    # what %trainwatch? shows: the --help text, from the same table (options.py)
    trainwatch.__doc__ = help_text()


def current(shell: Any = None) -> Any:
    """The live ``%trainwatch`` dashboard of this kernel (a TrainWatch), or None."""
    if shell is None:
        from IPython import get_ipython

        shell = get_ipython()
    state = _STATES.get(shell) if shell is not None else None
    return state.dashboard if state is not None else None


def load_ipython_extension(ipython: Any) -> None:
    ipython.register_magics(TrainWatchMagics)
    state_for(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    state = _STATES.pop(ipython, None)
    if state is not None:
        state.close()
    magics = ipython.magics_manager.magics
    for kind in ("line", "cell"):
        magics[kind].pop("trainwatch", None)
