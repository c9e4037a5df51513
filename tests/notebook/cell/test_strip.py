"""The ``%%trainwatch`` strip's words (issue 36): rates in MB/s, as README promises."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from trainwatch_lab.core.model import DiskRates, Sample
from trainwatch_lab.notebook.cell.magic import CellWatch


class _Sampler:
    """Only what CellWatch asks of a sampler before a sample comes."""

    def subscribe(self, fn: Callable[[Sample], Any]) -> Callable[[], None]:
        return lambda: None


def test_strip_says_rates_in_mb_per_s_even_when_small() -> None:
    """It said "W 147 kB/s" beside "R 45 MB/s": one unit, MB/s, as every chart."""
    watch = CellWatch(_Sampler(), [])  # type: ignore[arg-type]
    disk = DiskRates("vda", 1, 30, 45.0, 0.14, 0.5, 0.8, 0.1, 3.0)
    html = watch._strip_html(Sample(t=time.time() + 1, disks={"vda": disk}))
    assert "kB/s" not in html
    assert "R 47.2 MB/s" in html and "W 0.15 MB/s" in html, html
