"""The stateless rule list comes from a flag on each detector, and advice/ has no import
circle: every module imports on its own, first, in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from trainwatch_lab.advice.context import is_stateless, stateless, stateless_only
from trainwatch_lab.advice.registry import all_detectors, stateless_detectors
from trainwatch_lab.advice.storage import STATELESS_STORAGE_DETECTORS

ADVICE = Path(__file__).resolve().parents[2] / "trainwatch_lab" / "advice"


def test_the_one_shot_check_runs_the_flagged_rules_in_order() -> None:
    names = [d.__name__ for d in stateless_detectors()]
    assert names == [
        "mount_unresponsive",
        "shared_mount",
        "slow_mount",
        "disk_almost_full",
        "checkpoint_wont_fit",
    ]
    assert stateless_detectors() == STATELESS_STORAGE_DETECTORS
    assert not any(is_stateless(d) for d in all_detectors() if d.__name__ == "disk_saturated")


def test_the_flag_can_fail() -> None:
    def plain(ctx):  # type: ignore[no-untyped-def]
        return []

    assert stateless_only([plain]) == []
    assert stateless_only([stateless(plain)]) == [plain]


def test_every_advice_module_imports_first() -> None:
    for module in sorted(p.stem for p in ADVICE.glob("*.py") if p.stem != "__init__"):
        done = subprocess.run(
            [sys.executable, "-c", f"import trainwatch_lab.advice.{module}"],
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, f"{module}: {done.stderr.strip().splitlines()[-1:]}"
