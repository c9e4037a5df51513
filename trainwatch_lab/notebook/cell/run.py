"""Running a ``%%trainwatch`` cell body as IPython runs a plain cell.

The body is compiled before anything starts (a syntax error costs no sampler), run in the
user's namespace with exceptions propagating, and an exception is shown from the user's own
first frame, not from the frames of IPython and trainwatch that ran it.
"""

from __future__ import annotations

import ast
import contextlib
from dataclasses import dataclass
from types import CodeType
from typing import Any

from IPython.core.error import UsageError


@dataclass(frozen=True)
class Body:
    """A ``%%trainwatch`` cell's code, compiled before anything starts: a syntax error
    costs no sampler, and no strip is left saying "watching" under a cell that never ran."""

    code: CodeType
    last: CodeType | None  # the last expression, whose value the cell shows (Out[n])


def compile_body(shell: Any, cell: str, header: str) -> Body:
    """Compile a cell body as IPython compiles a cell: IPython syntax and AST transformers
    applied, the session's ``__future__`` flags, and a file name IPython knows, so that a
    traceback reads "Cell In[7], line 4" and shows the user's lines. The source is cached
    with the magic line first, so line numbers are those of the cell as the user sees it.

    A syntax error is shown as IPython shows one in a plain cell (where it is, no frames of
    ours), then UsageError fails the cell: raised as is, a SyntaxError would be shown with
    the frames of IPython and trainwatch that compiled it."""
    source = shell.transform_cell(cell)
    name = shell.compile.cache(
        f"{header}\n{source}", shell.execution_count, raw_code=f"{header}\n{cell}"
    )
    try:
        tree = shell.compile.ast_parse("\n" + source, filename=name)
    except SyntaxError:
        shell.showsyntaxerror()
        raise UsageError("trainwatch: the cell was not run: syntax error (above)") from None
    tree = shell.transform_ast(tree)
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = shell.compile(ast.Expression(tree.body.pop().value), name, "eval")
    return Body(shell.compile(tree, name, "exec"), last)


def run_body(shell: Any, body: Body) -> Any:
    """Run a compiled cell body like ``%%time`` does: in the user's namespace, exceptions
    propagate (so the cell fails as it would without the magic, and a summary still prints),
    the last expression's value returned. What the user sees of an exception starts at their
    own code (``show_from_user_code``)."""
    glob, loc = shell.user_global_ns, shell.user_ns
    try:
        exec(body.code, glob, loc)
        return eval(body.last, glob, loc) if body.last is not None else None
    except BaseException as exc:  # (KeyboardInterrupt too: the user's Ctrl-C)
        show_from_user_code(shell, exc)
        raise


def show_from_user_code(shell: Any, exc: BaseException) -> None:
    """Have IPython show ``exc`` from the user's first frame on, not from the frames of
    IPython and trainwatch that ran the cell body (four of them, before the user's line).

    The exception must still propagate: that is what marks the cell as failed (the kernel
    replies "error", nbclient stops) and what lets ``finally`` print the summary. Python adds
    our frames to its traceback on the way up, so instead of trimming the traceback we use
    IPython's ``_render_traceback_`` protocol: ``showtraceback`` asks the exception for its
    lines. It is set on this one exception and removed once used, so ``%tb`` and ``%debug``
    later still see the whole traceback; an exception that renders itself is left alone."""
    here = exc.__traceback__  # our frame: the exception was caught in run_body
    user = here.tb_next if here is not None else None
    if user is None or hasattr(exc, "_render_traceback_"):
        return

    def render() -> list[str]:
        with contextlib.suppress(AttributeError):
            del exc._render_traceback_  # type: ignore[attr-defined]
        formatter = shell.InteractiveTB
        try:
            return formatter.structured_traceback(type(exc), exc, user, tb_offset=0)
        except Exception:  # never lose the user's error to our formatting: show it all
            return formatter.structured_traceback(type(exc), exc, exc.__traceback__)

    with contextlib.suppress(AttributeError, TypeError):
        exc._render_traceback_ = render  # type: ignore[attr-defined]
