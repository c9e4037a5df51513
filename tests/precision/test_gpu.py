"""Precision of gpu-stalled on synthetic series through the real Advisor (every rule, every tick).

Each scenario is what a user does with a GPU in a notebook, a server or a terminal, with the
truth known: a model kept in memory while nobody runs anything is no stall; a cell or a script
whose loop stops feeding the GPU is, and only then. The codes that fired at any tick are judged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.precision.conftest import STORAGE_CODES
from trainwatch_lab.advice.advisor import Advisor
from trainwatch_lab.core.history import History
from trainwatch_lab.core.model import (
    Alert,
    GpuState,
    PathState,
    ProbeResult,
    ProcessIO,
    Sample,
    TrainingProcess,
)

T0 = 1_800_000_000.0
GIB = 1024**3
PID = 4242
GPU_CODES = ("gpu-stalled", "gpu-starved")
ALL_CODES = (*STORAGE_CODES, *GPU_CODES)

# where the main thread of a kernel waits: for the next message, or in the user's code
IDLE_KERNEL = {"file": "/usr/lib/python3.12/selectors.py", "function": "select", "idle_loop": True}
IN_CELL = {"file": "/tmp/ipykernel_1/123.py", "function": "<module>", "idle_loop": False}
DATALOADER = {"file": "/usr/lib/python3.12/selectors.py", "function": "select", "idle_loop": False}
ON_SHARE = {
    "file": "/site-packages/tensorboard/summary/writer/event_file_writer.py",
    "function": "flush",
    "idle_loop": False,
    "state": "D",
    "syscall": "write",
    "fd_path": "/mnt/share/logs/events.out.tfevents.1",
}


def share(responsive: bool = True, p50: float = 0.8) -> PathState:
    return PathState(
        path="/mnt/share/logs",
        exists=True,
        mountpoint="/mnt/share",
        fstype="fuse.sshfs",
        source="u@h:/x",
        kind="shared",
        shared=True,
        responsive=responsive,
        probe=ProbeResult(p50, p50, 16),
    )


Tick = Callable[[float], dict[str, Any]]


def replay(seconds: int, tick: Tick) -> tuple[set[str], list[Alert]]:
    """Every tick through the whole rule set; the codes that ever fired and their first alert."""
    advisor, history = Advisor(), History(capacity=4000)
    fired: dict[str, Alert] = {}
    for i in range(seconds + 1):
        t = float(i)
        spec = tick(t)
        gpu = GpuState(
            0, 0, "GPU-a", "H100", util_pct=spec["util"], process_mem_bytes=spec.get("mem", 6 * GIB)
        )
        sample = Sample(
            t=T0 + t,
            gpus=[gpu],
            paths={p.path: p for p in spec.get("paths", ())},
            process=ProcessIO(PID, 1, 0.0, 0.0, 0.0, 0.0, spec.get("mt")),
            kernels=spec.get("kernels", {}),
            processes=spec.get("processes", []),
        )
        history.append(sample)
        for alert in advisor.evaluate(sample, history):
            fired.setdefault(alert.code, alert)
    return set(fired), list(fired.values())


def trained_then(seconds: float, util: float = 85.0) -> Callable[[float], float]:
    """Training at ``util`` until ``seconds``, then 0 %."""
    return lambda t: util if t < seconds else 0.0


def test_model_loaded_notebook_idle_for_10_minutes(judge) -> None:
    util = trained_then(60)
    fired, alerts = replay(
        660, lambda t: {"util": util(t), "mt": IN_CELL if t < 60 else IDLE_KERNEL}
    )
    judge("model loaded, notebook idle for 10 minutes", fired, must_not=ALL_CODES, alerts=alerts)


def test_reading_results_in_a_cpu_cell_long_after_training(judge) -> None:
    """Training ended 10 min ago; a 2-minute pandas cell runs now: the GPU was not in use."""
    util = trained_then(60)

    def tick(t: float) -> dict[str, Any]:
        return {"util": util(t), "mt": IN_CELL if t < 60 or t >= 660 else IDLE_KERNEL}

    fired, alerts = replay(780, tick)
    judge("CPU cell 10 min after training", fired, must_not=ALL_CODES, alerts=alerts)


@pytest.mark.parametrize("stall_s", [45, 300])
def test_a_cell_blocked_on_a_dead_share_is_a_stall(judge, stall_s) -> None:
    util = trained_then(60)

    def tick(t: float) -> dict[str, Any]:
        dead = t >= 60
        return {"util": util(t), "mt": ON_SHARE if dead else IN_CELL, "paths": (share(not dead),)}

    fired, alerts = replay(60 + stall_s, tick)
    judge(
        f"cell blocked on a dead share for {stall_s} s",
        fired,
        must={"gpu-stalled"},
        must_not={"gpu-starved"},
        alerts=alerts,
    )


def test_the_whole_stall_is_measured(judge) -> None:
    util = trained_then(60)
    advisor, history = Advisor(), History(capacity=4000)
    last: Alert | None = None
    for i in range(60 + 600 + 1):
        t = float(i)
        s = Sample(
            t=T0 + t,
            gpus=[GpuState(0, 0, "GPU-a", "H100", util_pct=util(t), process_mem_bytes=GIB)],
            process=ProcessIO(PID, 1, 0.0, 0.0, 0.0, 0.0, DATALOADER),
        )
        history.append(s)
        last = next((a for a in advisor.evaluate(s, history) if a.code == "gpu-stalled"), last)
    assert last is not None and "for 10 min" in last.message, last
    assert f"pid {PID}" in last.message


def test_a_healthy_share_is_not_blamed(judge) -> None:
    util = trained_then(30)
    fired, alerts = replay(
        100, lambda t: {"util": util(t), "mt": DATALOADER, "paths": (share(p50=0.9),)}
    )
    judge(
        "loop waits on workers, share fast",
        fired,
        must={"gpu-stalled"},
        must_not={"gpu-starved", "slow-mount", "mount-unresponsive"},
        alerts=alerts,
    )
    stalled = next(a for a in alerts if a.code == "gpu-stalled")
    assert "storage looks healthy" in stalled.message, stalled.message


def _kernels(state: str, mem: int = 6 * GIB) -> dict[str, dict[str, Any]]:
    idle = {
        "id": "k1",
        "name": "python3",
        "pid": 77,
        "execution_state": "idle",
        "gpu_mem_bytes": GIB,
    }
    other = {
        "id": "k2",
        "name": "python3",
        "pid": 88,
        "execution_state": state,
        "gpu_mem_bytes": mem,
    }
    return {"k1": idle, "k2": other}


@pytest.mark.parametrize("state", ["idle", "busy"])
def test_server_fires_only_for_a_busy_kernel_and_names_it(judge, state) -> None:
    util = trained_then(60)
    fired, alerts = replay(
        200, lambda t: {"util": util(t), "kernels": _kernels("busy" if t < 60 else state)}
    )
    must = {"gpu-stalled"} if state == "busy" else set()
    judge(f"server, kernel {state} after training", fired, must, ALL_CODES, alerts=alerts)
    if must:
        assert "python3 kernel (pid 88)" in alerts[0].message, alerts[0].message


def _script(fd_path: str | None) -> TrainingProcess:
    mt = {"state": "S", "wchan": None, "syscall": "read", "fd_path": fd_path, "blocked": True}
    return TrainingProcess(
        9, "python train.py", "/w", ["gpu"], gpus=[0], gpu_mem_bytes=GIB, main_thread=mt
    )


@pytest.mark.parametrize(
    ("fd_path", "stalls"), [("/dev/pts/3", False), ("/data/shard-7.tar", True)]
)
def test_a_script_at_its_prompt_is_not_stalled(judge, fd_path, stalls) -> None:
    util = trained_then(60)
    fired, alerts = replay(150, lambda t: {"util": util(t), "processes": [_script(fd_path)]})
    must = {"gpu-stalled"} if stalls else set()
    judge(f"script reading {fd_path}", fired, must, ALL_CODES, alerts=alerts)
