"""The one line every surface opens with: is my storage OK, at a glance.

The dashboard's header, the panel's header and the status bar all show these words, made
here once per tick (the Advisor sets ``Sample.headline``) and sent with the sample, so the
three can never disagree: the worst warning and how many, GPU utilization, the busiest
disk under the watched paths, the least free space and, for a watched training loop, the
time it lost to storage (io-bound's own measure).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..core.defaults import DEFAULTS, Defaults
from ..core.history import History
from ..core.model import SEVERITY_RANK, Alert, Headline, Sample, watched_devices
from .io_bound import lost_to_storage
from .text import fmt_bytes, fmt_mbs, fmt_pct, free_fraction, warning_count_text


def _verdict(warnings: Sequence[Alert]) -> tuple[str, str]:
    serious = [a for a in warnings if a.severity != "info"]
    if not serious:
        return "ok", "Storage OK"
    worst = max(serious, key=lambda a: SEVERITY_RANK[a.severity]).severity
    text = warning_count_text(a.severity for a in serious)
    critical = sum(a.severity == "critical" for a in serious)
    if critical and critical < len(serious):
        text += f" ({critical} critical)"
    return worst, text[0].upper() + text[1:]


def _gpu(sample: Sample) -> str | None:
    utils = [g.util_pct for g in sample.gpus if g.util_pct is not None and not g.lost]
    if not utils:
        return None
    return f"GPU {sum(utils) / len(utils):.0f} %"


def _busiest_disk(sample: Sample) -> tuple[str | None, float | None]:
    rates = [sample.disks[d] for d in watched_devices(sample) if d in sample.disks]
    if not rates:
        return None, None
    busiest = max(rates, key=lambda r: (r.read_bps + r.write_bps, r.util))
    bps = busiest.read_bps + busiest.write_bps
    return f"{busiest.device} {fmt_mbs(bps)}, {busiest.util:.0f} % busy", bps


def _least_free(sample: Sample) -> str | None:
    roomy = [
        p
        for p in sample.paths.values()
        if p.responsive and p.total_bytes and p.avail_bytes is not None and not p.read_only
    ]
    if not roomy:
        return None
    p = min(roomy, key=lambda s: free_fraction(s) or 0.0)
    share = fmt_pct(free_fraction(p))  # as df counts it
    # "74 GiB (73 %) free on /": the share is of free space, said before "free" so that
    # beside a "Space used" chart it cannot read as 73 % used (issue 36)
    return f"{fmt_bytes(p.avail_bytes)} ({share}) free on {p.mountpoint or p.path}"


def headline(
    sample: Sample,
    warnings: Sequence[Alert] | None = None,
    history: History | None = None,
    defaults: Defaults = DEFAULTS,
) -> Headline:
    """``warnings`` default to the sample's own (the Advisor passes the ones it just made);
    ``history`` gives the time lost to storage (none without it)."""
    warnings = sample.warnings if warnings is None else warnings
    level, verdict = _verdict(warnings)
    gpu = _gpu(sample)
    disk, bps = _busiest_disk(sample)
    lost = lost_to_storage(sample, history, defaults) if history is not None else None
    facts = [f for f in (gpu, disk, _least_free(sample), lost) if f]
    notes = sum(a.severity == "info" for a in warnings)
    # the status bar: as short as it gets ("GPU 87 % · disk 45 MB/s · ⚠ 1")
    brief = [gpu] if gpu else []
    if bps is not None:
        brief.append(f"disk {fmt_mbs(bps)}")
    serious = len(warnings) - notes
    if serious:
        brief.append(f"⚠ {serious}")
    return Headline(
        level=level,  # type: ignore[arg-type]
        verdict=verdict,
        facts=facts,
        text=" · ".join([verdict, *facts]),
        brief=" · ".join(brief) or "TrainWatch",
        notes=notes,
    )
