"""GPU rules over a real History: when they fire, and what evidence the message carries."""

from __future__ import annotations

from collections.abc import Callable

from trainwatch_lab.advice.advisor import Advisor
from trainwatch_lab.advice.gpu.detectors import (
    GPU_DETECTORS,
    gpu_stalled,
    gpu_starved,
    gpu_unavailable,
    input_cpu_bound,
)
from trainwatch_lab.core.defaults import DEFAULTS
from trainwatch_lab.core.history import History
from trainwatch_lab.core.model import (
    Alert,
    DiskRates,
    GpuState,
    PathState,
    ProbeResult,
    ProcessIO,
    Sample,
    TrainingProcess,
)

GIB = 1024**3
PID = 4242


def share(responsive: bool = True, p50: float | None = 41.0) -> PathState:
    return PathState(
        path="/mnt/share/logs",
        exists=True,
        mountpoint="/mnt/share",
        fstype="fuse.sshfs",
        source="user@host:/export",
        kind="shared",
        shared=True,
        responsive=responsive,
        probe=ProbeResult(p50, p50, 16, slow_runs=2) if p50 is not None else None,
    )


def local_data() -> PathState:
    return PathState(
        path="/data",
        exists=True,
        mountpoint="/data",
        fstype="ext4",
        device="nvme0n1",
        kind="local",
        probe=ProbeResult(0.4, 0.9, 16),
    )


def disk(util: float, await_ms: float) -> DiskRates:
    return DiskRates("nvme0n1", 900, 1, 450, 0.1, await_ms, 0.5, 3.0, util)


def make(
    t: float,
    util: float,
    proc_mem: int | None = 2 * GIB,
    paths: tuple[PathState, ...] = (),
    disks: tuple[DiskRates, ...] = (),
    read_bps: float = 0.0,
    write_bps: float = 0.0,
    main_thread: dict | None = None,
    workers_on_files: float | None = None,
) -> Sample:
    """``workers_on_files``: the share of the time DataLoader workers slept on reads under
    the first path (core.processes.waits), with the loop waiting on them the rest."""
    proc = ProcessIO(PID, 1, read_bps, write_bps, read_bps, write_bps, main_thread)
    if workers_on_files is not None:
        proc.waits = {p.path: 0.0 for p in paths}
        proc.worker_waits = {p.path: 0.0 for p in paths} | {paths[0].path: workers_on_files}
        proc.worker_wait_calls = {paths[0].path: {"read": workers_on_files}}
        proc.wait_other, proc.waits_elsewhere, proc.wait_workers = 0.9, 0.0, 4
    return Sample(
        t=t,
        gpus=[GpuState(0, 0, "GPU-x", "H100", util_pct=util, process_mem_bytes=proc_mem)],
        paths={p.path: p for p in paths},
        disks={d.device: d for d in disks},
        process=proc,
    )


def run(samples: list[Sample], detector: Callable) -> list[list[Alert]]:
    """Feed samples the way the Sampler does: append to History, then evaluate."""
    history = History(capacity=600)
    advisor = Advisor([detector], defaults=DEFAULTS)
    out = []
    for s in samples:
        history.append(s)
        out.append(advisor.evaluate(s, history))
    return out


def test_registry_exports_the_rules() -> None:
    assert [gpu_unavailable, gpu_stalled, gpu_starved, input_cpu_bound] == GPU_DETECTORS


def test_gpu_unavailable_is_info_with_the_reason() -> None:
    s = Sample(t=1, notes={"gpus": "the NVIDIA driver is not loaded (NVML: Driver Not Loaded)"})
    (alerts,) = run([s], gpu_unavailable)
    assert [(a.code, a.severity, a.subject) for a in alerts] == [("gpu-unavailable", "info", "gpu")]
    assert "Driver Not Loaded" in alerts[0].message
    assert run([make(1, 50)], gpu_unavailable) == [[]]


def test_stalled_fires_after_the_duration_and_names_the_mount() -> None:
    mt = {
        "file": "/usr/lib/python3/site-packages/tensorboard/summary/writer/event_file_writer.py",
        "line": 120,
        "function": "flush",
        "state": "D",
        "wchan": "request_wait_answer",
        "syscall": "write",
        "fd_path": "/mnt/share/logs/events.out.tfevents.1700000000.host",
    }
    samples = [
        make(t, 0.0 if t else 80.0, paths=(share(responsive=False),), main_thread=mt)
        for t in range(41)
    ]
    results = run(samples, gpu_stalled)
    first = next(i for i, r in enumerate(results) if r)
    assert first == 31  # work at t=0, 0 % since t=1; fires once 30 s have passed
    assert all(results[i] for i in range(31, 41))
    alert = results[-1][0]
    assert (alert.code, alert.severity, alert.subject) == ("gpu-stalled", "warning", "GPU 0")
    msg = alert.message
    assert msg.startswith("The training process (pid 4242) holds 2 GiB on GPU 0 at 0 % for 39 s")
    assert "holds 2 GiB" in msg
    assert "/mnt/share/logs is on fuse.sshfs, not answering within 2 s" in msg
    assert (
        "the training loop is blocked in event_file_writer.py:flush writing "
        "/mnt/share/logs/events.out.tfevents.1700… (fuse.sshfs)" in msg
    )
    assert "check the server behind user@host:/export" in alert.fix


def test_stalled_needs_memory_held_by_the_watched_tree() -> None:
    paths = (share(),)
    no_memory = [make(t, 0.0 if t else 80.0, proc_mem=0, paths=paths) for t in range(45)]
    assert not any(run(no_memory, gpu_stalled))
    unknown_memory = [make(t, 0.0 if t else 80.0, proc_mem=None, paths=paths) for t in range(45)]
    assert not any(run(unknown_memory, gpu_stalled))


def test_stalled_restarts_counting_after_activity() -> None:
    samples = [make(t, 90.0 if t == 20 else 1.0, paths=(share(),)) for t in range(60)]
    results = run(samples, gpu_stalled)
    assert next(i for i, r in enumerate(results) if r) == 51  # 30 s after the busy tick at 20


def test_stalled_on_a_shared_mount_without_main_thread_info() -> None:
    samples = [
        make(t, 2.0 if t else 80.0, paths=(share(p50=41.0), local_data()), disks=(disk(3, 0.2),))
        for t in range(35)
    ]
    alert = run(samples, gpu_stalled)[-1][0]
    assert "at 2 %" in alert.message
    assert "/mnt/share/logs is on fuse.sshfs, write+fsync p50 41 ms" in alert.message
    assert "disk nvme0n1 was 3 % busy" in alert.message
    assert "waiting on storage" in alert.message
    assert "local disk" in alert.fix


def test_stalled_with_healthy_storage_says_so() -> None:
    samples = [
        make(t, 0.0 if t else 80.0, paths=(local_data(),), disks=(disk(2, 0.3),), write_bps=1e5)
        for t in range(35)
    ]
    alert = run(samples, gpu_stalled)[-1][0]
    assert "storage looks healthy" in alert.message
    assert "the process wrote 100 kB/s" in alert.message
    assert f"py-spy dump --pid {PID}" in alert.fix


def test_starved_when_util_is_low_and_erratic_and_storage_is_the_limit() -> None:
    samples = [
        make(
            t,
            0.0 if t % 2 else 80.0,
            paths=(local_data(),),
            disks=(disk(92, 18),),
            read_bps=4e8,
            workers_on_files=0.8,
        )
        for t in range(70)
    ]
    results = run(samples, gpu_starved)
    assert not any(results[:48])  # needs most of the 60 s window first
    alert = results[-1][0]
    assert (alert.code, alert.subject) == ("gpu-starved", "GPU 0")
    assert "averaged 40 % (swinging ±40 %)" in alert.message
    assert "disk nvme0n1 was 92 % busy, 18 ms await" in alert.message
    assert "read 400 MB/s" in alert.message
    # 400 MB/s of the device's 450 MiB/s
    assert "its block reads were 85 % of nvme0n1's 472 MB/s, 18 ms read await" in alert.message
    assert "its DataLoader workers slept on file reads 80 % of the time" in alert.message
    assert "num_workers" in alert.fix


def test_each_piece_of_evidence_is_needed() -> None:
    """Busy disk and low erratic GPU, but one of the three missing: no gpu-starved."""
    base = {"paths": (local_data(),), "read_bps": 4e8, "workers_on_files": 0.8}
    cases = {
        "reads served fast": {**base, "disks": (disk(92, 0.4),)},
        "someone else's reads": {**base, "disks": (disk(92, 18),), "read_bps": 1e7},
        "workers hardly wait": {**base, "disks": (disk(92, 18),), "workers_on_files": 0.2},
        "nothing measured the loaders": {
            **base,
            "disks": (disk(92, 18),),
            "workers_on_files": None,
        },
    }
    for name, kw in cases.items():
        samples = [make(t, 0.0 if t % 2 else 80.0, **kw) for t in range(70)]
        assert not any(run(samples, gpu_starved)), name
    # workers asleep on reads 20 % of the time: neither storage- nor CPU-bound (the gap
    # between the two cut-offs keeps a pipeline near one from flapping between verdicts)
    samples = [make(t, 0.0 if t % 2 else 80.0, **cases["workers hardly wait"]) for t in range(70)]
    assert not any(run(samples, input_cpu_bound))


def test_steady_reads_from_the_page_cache_are_a_cpu_bound_feed() -> None:
    """Steady read_chars, no block reads, workers busy decoding while the loop waits on
    them: input-cpu-bound ("more workers"), never gpu-starved."""
    samples = [
        make(
            t,
            10.0 if t % 3 else 70.0,
            paths=(local_data(),),
            disks=(disk(3, 0.2),),
            read_bps=0.0,
            workers_on_files=0.02,
        )
        for t in range(70)
    ]
    for s in samples:
        s.process.read_chars_s = 2e8  # from the page cache: no block reads
    assert not any(run(samples, gpu_starved))
    alert = run(samples, input_cpu_bound)[-1][0]
    assert (alert.code, alert.severity) == ("input-cpu-bound", "info")
    assert "waited on its workers 90 % of the time" in alert.message
    assert "slept on file reads only 2.0 % of the time" in alert.message
    assert "more workers" in alert.fix


def test_not_starved_when_storage_is_quiet_or_gpu_steady() -> None:
    quiet = [
        make(
            t,
            0.0 if t % 2 else 80.0,
            paths=(local_data(),),
            disks=(disk(5, 0.5),),
            read_bps=(t % 5) * 1e6,
        )
        for t in range(70)
    ]
    assert not any(run(quiet, gpu_starved))
    steady_low = [
        make(t, 30.0, paths=(local_data(),), disks=(disk(95, 30),), read_bps=4e8) for t in range(70)
    ]
    assert not any(run(steady_low, gpu_starved))
    other_process_gpu = [
        make(t, 0.0 if t % 2 else 80.0, proc_mem=0, paths=(local_data(),), disks=(disk(95, 30),))
        for t in range(70)
    ]
    assert not any(run(other_process_gpu, gpu_starved))


def test_stalled_names_the_blocked_syscall_and_finds_the_mount_of_the_file() -> None:
    mt = {
        "file": "/src/train.py",
        "line": 7,
        "function": "save",
        "state": "D",
        "wchan": None,
        "syscall": "fsync",
        "fd_path": "/mnt/share/logs/ckpt/last.pt",
    }
    other = local_data()  # the share is not the first path in sort order, but it is blocked
    samples = [
        make(t, 0.0 if t else 80.0, paths=(other, share()), main_thread=mt) for t in range(35)
    ]
    msg = run(samples, gpu_stalled)[-1][0].message
    assert "blocked in train.py:save waiting for fsync() of /mnt/share/logs/ckpt/last.pt" in msg
    assert "(fuse.sshfs)" in msg and "/mnt/share/logs is on fuse.sshfs" in msg


def _script(io: ProcessIO | None = None, blocked: bool = True) -> TrainingProcess:
    """A training script the sampler found, its main thread blocked in a read right now."""
    mt = {"state": "D", "syscall": "read", "fd_path": "/data/shard-7.tar", "blocked": blocked}
    io = io or ProcessIO(9, 1, 4e8, 0.0, 4e8, 0.0)
    return TrainingProcess(
        9, "python train.py", "/w", ["gpu"], gpus=[0], gpu_mem_bytes=GIB, io=io, main_thread=mt
    )


def _found(scripts: Callable[[int], TrainingProcess], ticks: int = 70) -> list[Alert]:
    """gpu-starved on the last of ``ticks`` samples of a found script (no watched process)."""
    samples = [
        make(t, 0.0 if t % 2 else 80.0, proc_mem=0, paths=(local_data(),), disks=(disk(92, 18),))
        for t in range(ticks)
    ]
    for t, s in enumerate(samples):
        s.process, s.processes = None, [scripts(t)]
    return run(samples, gpu_starved)[-1]


def _measured(t: int, reads: float, call: str = "read") -> TrainingProcess:
    """What monitor.TrainingWaits gives the row each tick: its workers' waits, by call."""
    io = ProcessIO(9, 4, 4e8, 0.0, 4e8, 0.0)
    io.waits, io.waits_elsewhere, io.wait_other = {"/data": 0.0}, 0.0, 0.9
    io.worker_waits, io.worker_wait_calls = {"/data": reads}, {"/data": {call: reads}}
    return _script(io, blocked=t % 2 == 0)


def test_starved_script_found_on_the_machine_by_its_measured_read_waits() -> None:
    """A found script: its block reads now, the device's read await over the window and its
    workers' read waits as TrainingWaits measured them tick by tick over the window."""
    (alert,) = _found(lambda t: _measured(t, 0.8))
    assert "while pid 9 (`python train.py`) trained on it" in alert.message
    assert "its block reads were 85 % of nvme0n1's" in alert.message
    assert "its DataLoader workers slept on file reads 80 % of the time" in alert.message
    # waits on writes are no reads; nor is one lucky tick (the last) a window
    assert _found(lambda t: _measured(t, 0.8, call="fsync")) == []
    assert _found(lambda t: _measured(t, 0.8 if t == 69 else 0.0)) == []
    assert _found(lambda t: _measured(t, 0.8) if t >= 60 else _script()) == []


def test_one_look_at_a_found_script_is_no_verdict() -> None:
    """Its main thread caught in a read at this instant, waits not measured: no share of
    the time to quote, so no gpu-starved (it once said "slept on file reads 100 %")."""
    assert _found(lambda t: _script(blocked=True)) == []


def test_only_reads_count_as_the_loop_sleeping_on_files() -> None:
    """The watched loop (no workers) asleep in fsync of its logs under the data path, and on
    files under no watched path: not starved of data; the same share in read() is."""

    def loop(call: str) -> list[Sample]:
        samples = [
            make(t, 0.0 if t % 2 else 80.0, paths=(local_data(),), disks=(disk(92, 18),))
            for t in range(70)
        ]
        for s in samples:
            s.process.read_bytes_s = 4e8
            s.process.waits, s.process.wait_calls = {"/data": 0.5}, {"/data": {call: 0.5}}
            s.process.waits_elsewhere, s.process.wait_other = 0.3, 0.0
        return samples

    assert not any(run(loop("fsync"), gpu_starved))
    alert = run(loop("pread64"), gpu_starved)[-1][0]
    assert "the main thread slept on file reads 50 % of the time" in alert.message


def test_gpu_unavailable_for_a_selection_that_matches_none_names_the_selection() -> None:
    """A --gpu / c.TrainWatch.gpu that matches no GPU here (core.gpu.source's notes): not "no
    driver", and the fix is the selection, not a CPU-only shrug."""
    notes = {
        "gpus": "none of the GPUs GPU-ffff is present (here: 0 (GPU-aaaa))",
        "gpu_selection": "the GPU selection GPU-ffff matches no GPU here",
    }
    ((alert,),) = run([Sample(t=1, notes=notes)], gpu_unavailable)
    assert "none of the GPUs GPU-ffff is present (here: 0 (GPU-aaaa))" in alert.message
    assert "nvidia-smi -L" in alert.fix and "CPU-only" not in alert.fix
