"""``%%trainwatch``: a compact live strip while the cell runs, then a summary table.

The strip is one HTML widget updated from the sampler thread (widget state, so it moves
while the cell's own code holds the main thread). When the cell ends, the strip's output is
replaced in place (``update_display``) by the summary, which is plain text + HTML and so
survives in the saved notebook and in nbconvert.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import ipywidgets as widgets

from ...advice.text import fmt_duration, fmt_mbs, fmt_ms, warning_count_text
from ...core.defaults import DEFAULTS, Defaults
from ...core.gpu.select import as_selection
from ...core.guard.guard import MountUnresponsive, WorkerFailed, WorkerUnavailable
from ...core.model import Sample, watched_devices
from ...core.paths.look import file_sizes_guarded, written_since_guarded
from ...core.paths.written import Written
from ...core.sampler import Sampler
from ..warnings_html import STYLE, esc
from .report import CellSummary
from .summary import summarize_cell
from .warnings import WarningLog


class Strip(widgets.HTML):
    """The live strip; terminals and nbconvert see one plain line instead of a widget repr."""

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        data = super()._repr_mimebundle_(**kwargs) or {}
        if isinstance(data, tuple):
            data = data[0]
        return {**data, "text/plain": "trainwatch: watching this cell…"}


class CellWatch:
    """Records one cell's run on a (possibly shared) sampler."""

    def __init__(
        self,
        sampler: Sampler,
        paths: Sequence[str],
        gpus: Sequence[int | str] | None = None,
        defaults: Defaults = DEFAULTS,
    ) -> None:
        self.sampler = sampler
        self.paths = list(paths)
        self.gpus = as_selection(gpus)  # indices, GPU or MIG UUIDs
        self.defaults = defaults
        self.start_t = time.time()
        self.end_t: float | None = None
        self.warnings = WarningLog()
        self.samples = 0
        # per watched path, its files' [inode, size] as the cell began: what it wrote is
        # what they grew (an appended log counts its new bytes, not its whole size)
        self._before: dict[str, dict[str, list[int]] | None] = {}
        # a tick already under way, then the one asked for: each bounded by the mount timeout
        self.tick_wait_s = 2 * defaults.mount_timeout_s + 0.5
        self._first = threading.Event()
        self._lock = threading.Lock()
        self.strip = Strip(self._strip_html(None))
        self.strip.add_class("tw-strip-widget")
        self._unsubscribe = sampler.subscribe(self._on_sample)

    def wait_for_baseline(self, timeout: float) -> None:
        """For a fresh sampler: let a first sample with free space of every path land before
        the cell starts, so the summary measures from a reading taken before its first write
        (bounded: a dead mount answers nothing, and the sampler reports that)."""
        self._first.wait(timeout)
        self._before = self._listings(self.sampler.latest)
        self.start_t = time.time()

    def take_baseline(self, timeout: float | None = None) -> None:
        """For a running sampler: ask for a sample right before the cell starts. Its last
        one may be an interval old, and the first interval of the cell would then count
        what happened before it (the previous cell's writes) as this cell's."""
        self.sampler.tick_now(self.tick_wait_s if timeout is None else timeout)
        self._before = self._listings(self.sampler.latest)
        self.start_t = time.time()

    def _on_sample(self, sample: Sample) -> None:
        measured = all(
            (st := sample.paths.get(p)) is not None and st.avail_bytes is not None
            for p in self.paths
        )
        if measured:  # (a path that never answers costs wait_for_baseline's timeout, once)
            self._first.set()
        with self._lock:
            if sample.t <= self.start_t:
                return
            self.samples += 1
            self.warnings.observe(sample.t, sample.warnings)  # (info, no GPU, is a note)
        self.strip.value = self._strip_html(sample)

    def _strip_html(self, sample: Sample | None) -> str:
        elapsed = fmt_duration(time.time() - self.start_t)
        if sample is None:
            body = f"trainwatch: watching this cell · {elapsed} · waiting for the first sample"
        else:
            parts = [f"trainwatch ● {elapsed}"]
            for name in watched_devices(sample)[:4]:
                d = sample.disks.get(name)
                if d is not None:
                    parts.append(
                        f"{name} R {fmt_mbs(d.read_bps)} W {fmt_mbs(d.write_bps)} "
                        f"await {fmt_ms(max(d.r_await, d.w_await))} util {d.util:.0f}%"
                    )
            for g in sample.gpus:
                if (self.gpus is None or g in self.gpus) and g.util_pct is not None:
                    parts.append(f"GPU{g.index} {g.util_pct:.0f}%")
            with self._lock:
                raised = self.warnings.alerts()
            count = warning_count_text(a.severity for a in raised)
            serious = any(a.severity != "info" for a in raised)
            parts.append(f"⚠ {count}" if serious else count)
            body = " · ".join(parts)
        return (
            f'<style>{STYLE}</style><div class="tw-root tw-strip" data-samples="{self.samples}">'
            f"{esc(body)}</div>"
        )

    def finish(self, wait_s: float | None = None) -> CellSummary:
        """Stop recording and summarise up to a sample asked for as the cell ended: its last
        writes are counted however short it was, and no later sample (the next cell's) is.
        The sampler's thread takes that sample; we wait on an Event (at most ``wait_s``),
        never on a mount."""
        self.end_t = time.time()
        final = self.sampler.tick_now(self.tick_wait_s if wait_s is None else wait_s)
        self._unsubscribe()
        latest = self.sampler.latest
        rows = latest.gpus if latest else []
        summary = summarize_cell(
            self.sampler.history,
            self.start_t,
            final.t if final is not None else self.end_t,
            self.paths,
            self.warnings.entries(),
            gpu_indices=None if self.gpus is None else self.gpus.indices(rows),
            defaults=self.defaults,
            gpu_note=latest.notes.get("gpus") if latest else None,
            files=self.files_written(latest),
        )
        summary.seconds = self.end_t - self.start_t
        return summary

    def _each_answering_path(
        self, latest: Sample | None, ask: Callable[..., Any]
    ) -> dict[str, Any]:
        """``ask(guard, mountpoint, path)`` per watched path that answered ``latest``, through
        the checkpoint scan's helper of its mount (bounded: one budget in all plus the mount
        timeout; a path that did not answer is not asked, and gets None)."""
        source = self.sampler.find_source("paths")
        guard = getattr(source, "guard", None)
        found: dict[str, Any] = {}
        deadline = time.monotonic() + self.defaults.cell_files_budget_s
        for path in self.paths:
            state = latest.paths.get(path) if latest is not None else None
            found[path] = None
            if guard is None or state is None or not state.responsive or not state.exists:
                continue
            if time.monotonic() >= deadline:
                continue
            with contextlib.suppress(MountUnresponsive, WorkerFailed, WorkerUnavailable, OSError):
                found[path] = ask(guard, state.mountpoint or path, path)
        return found

    def _listings(self, latest: Sample | None) -> dict[str, dict[str, list[int]] | None]:
        """The files under each watched path as the cell begins, with their sizes."""
        return self._each_answering_path(
            latest, lambda guard, mount, path: file_sizes_guarded(guard, mount, path, self.defaults)
        )

    def files_written(self, latest: Sample | None) -> dict[str, Written | None]:
        """Per watched path, the files modified under it since the cell began and the bytes
        the cell added to them (``_before``)."""

        def ask(guard: Any, mount: str, path: str) -> Written:
            before = self._before.get(path)
            return written_since_guarded(
                guard, mount, path, self.start_t, self.defaults, before=before
            )

        return self._each_answering_path(latest, ask)

    def close(self) -> None:
        self.strip.close()
