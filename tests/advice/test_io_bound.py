"""io-bound: firing and not firing on constructed samples, with the fix that fits the call."""

from __future__ import annotations

from trainwatch_lab.advice.advisor import Advisor, Context
from trainwatch_lab.advice.io_bound import io_bound, kind_of
from trainwatch_lab.core.defaults import DEFAULTS
from trainwatch_lab.core.history import History
from trainwatch_lab.core.model import Alert, PathState, ProcessIO, Sample

T0 = 1_800_000_000.0
SHARE = "/mnt/share/runs"
DATA = "/data"


def proc(
    main: dict[str, dict[str, float]],
    workers: dict[str, dict[str, float]] | None = None,
    other: float = 0.0,
) -> ProcessIO:
    """The watched process with per-path fractions split by system call."""
    p = ProcessIO(4242, 3, 0, 0, 0, 0)
    p.wait_samples, p.wait_other = 20, other
    p.wait_calls = {path: calls for path, calls in main.items() if calls}
    p.waits = {path: sum(calls.values()) for path, calls in main.items()}
    p.wait_files = {SHARE: f"{SHARE}/events.out.tfevents.1"}
    if workers is not None:
        p.worker_wait_calls = {path: calls for path, calls in workers.items() if calls}
        p.worker_waits = {path: sum(calls.values()) for path, calls in workers.items()}
        p.wait_workers = 4
    return p


PATHS = {
    SHARE: PathState(SHARE, mountpoint="/mnt/share", fstype="nfs4", kind="shared", shared=True),
    DATA: PathState(DATA, mountpoint="/", fstype="ext4", kind="local", device="vda"),
}


def run(seconds: int, make: object) -> list[Alert]:
    history = History(capacity=600)
    alerts: list[Alert] = []
    for i in range(seconds + 1):
        sample = Sample(t=T0 + i, paths=dict(PATHS), process=make(i))
        history.append(sample)
        alerts = list(io_bound(Context(sample, history, DEFAULTS, None)))
    return alerts


def test_fsync_of_logs_on_a_share_is_highly_io_bound() -> None:
    alerts = run(30, lambda i: proc({SHARE: {"fsync": 0.28, "write": 0.03}, DATA: {}}))
    assert [(a.code, a.severity, a.subject) for a in alerts] == [("io-bound", "warning", SHARE)]
    message = alerts[0].message
    assert "pid 4242" in message and "31 % of the last 30 s" in message
    assert f"mostly in fsync() of {SHARE}/events.out.tfevents.1" in message
    assert "highly I/O-bound" in message
    assert "local_mirror('/mnt/share/runs')" in alerts[0].fix
    assert "trainwatch-lab mirror LOCAL_DIR /mnt/share/runs" in alerts[0].fix


def test_moderately_io_bound_reads_are_an_info_with_the_data_fix() -> None:
    alerts = run(30, lambda i: proc({SHARE: {}, DATA: {"pread64": 0.08}}))
    assert [(a.severity, a.subject) for a in alerts] == [("info", DATA)]
    assert "moderately" in alerts[0].message
    assert "num_workers" in alerts[0].fix and "faster disk" in alerts[0].fix


def test_one_checkpoint_is_no_verdict_and_short_runs_wait() -> None:
    def spike(i: int) -> ProcessIO:  # 3 s of 90 % once in a minute: 4.5 %
        return proc({SHARE: {"write": 0.9 if 10 <= i < 13 else 0.0}, DATA: {}})

    assert run(60, spike) == []
    steady = lambda i: proc({SHARE: {"fsync": 0.5}, DATA: {}})  # noqa: E731
    assert run(int(DEFAULTS.io_bound_min_s) - 1, steady) == []  # not measured long enough
    assert run(int(DEFAULTS.io_bound_min_s) + 1, steady) != []


def test_unmeasured_process_says_nothing() -> None:
    quiet = ProcessIO(4242, 1, 0, 0, 0, 0)  # wait_samples == 0: no ptrace access
    assert run(30, lambda i: quiet) == []
    assert run(30, lambda i: None) == []


def test_workers_waiting_on_reads_while_the_loop_waits_for_them() -> None:
    def starved(i: int) -> ProcessIO:
        return proc({SHARE: {}, DATA: {}}, workers={DATA: {"read": 0.7}, SHARE: {}}, other=0.4)

    alerts = run(30, starved)
    assert [(a.severity, a.subject) for a in alerts] == [("warning", DATA)]
    assert "worker processes of pid 4242 (4)" in alerts[0].message
    assert "40 % of the time on something other than a file" in alerts[0].message
    assert "num_workers" in alerts[0].fix
    busy = run(
        30,
        lambda i: proc({SHARE: {}, DATA: {}}, workers={DATA: {"read": 0.7}, SHARE: {}}),
    )
    assert [a.severity for a in busy] == ["info"]  # the loop never waited for them


def test_on_a_local_disk_the_fix_is_fewer_flushes_not_a_mirror() -> None:
    """Issue 23 item 5: io-bound on local ext4 (a TensorBoard file's fsync) suggested
    local_mirror, "log to local disk", for a path already on local disk."""
    alerts = run(30, lambda i: proc({DATA: {"fsync": 0.06}, SHARE: {}}))
    (alert,) = alerts
    assert alert.subject == DATA and "local_mirror" not in alert.fix
    assert "trainwatch-lab mirror" not in alert.fix and "local disk" not in alert.fix
    assert "flush_secs" in alert.fix and "max_queue" in alert.fix
    assert "background thread" in alert.fix and "faster disk" in alert.fix
    writes = run(30, lambda i: proc({DATA: {"pwrite64": 0.3}, SHARE: {}}))
    assert "local_mirror" not in writes[0].fix and "max_queue" in writes[0].fix


def test_the_fix_follows_the_call() -> None:
    assert kind_of("fdatasync") == "sync" and kind_of("close") == "sync"
    assert kind_of("pwrite64") == "write" and kind_of("preadv2") == "read"
    assert kind_of("flock") == "lock"
    assert kind_of("openat") == kind_of("statx") == kind_of("getdents64") == "meta"
    alerts = run(30, lambda i: proc({SHARE: {"statx": 0.1, "openat": 0.15}, DATA: {}}))
    assert "list the files once" in alerts[0].fix
    locks = run(30, lambda i: proc({SHARE: {"flock": 0.3}, DATA: {}}))
    assert "HDF5_USE_FILE_LOCKING=FALSE" in locks[0].fix


def test_the_advisor_runs_it_by_default() -> None:
    advisor = Advisor()
    history = History(capacity=600)
    codes: list[str] = []
    for i in range(31):
        sample = Sample(
            t=T0 + i, paths={SHARE: PathState(SHARE)}, process=proc({SHARE: {"fsync": 0.3}})
        )
        history.append(sample)
        codes = [a.code for a in advisor(sample, history)]
    assert "io-bound" in codes


def test_the_headline_says_the_time_lost_as_the_rule_measures_it() -> None:
    """Every surface opens with the headline: the time lost is io-bound's own window mean,
    so the words and the warning cannot disagree; a tick not yet measured keeps them."""
    advisor = Advisor()
    history = History(capacity=600)
    for i in range(61):
        fsync = 0.5 if i % 2 else 0.0  # half the ticks: 25 % over the window
        sample = Sample(t=T0 + i, paths={SHARE: PathState(SHARE), DATA: PathState(DATA)},
                        process=proc({SHARE: {"fsync": fsync}, DATA: {"read": 0.002}}))  # fmt: skip
        history.append(sample)
        warnings = advisor(sample, history)
    assert sample.headline is not None
    assert "25 % waiting on /mnt/share/runs (fsync)" in sample.headline.facts
    (io,) = [w for w in warnings if w.code == "io-bound"]
    assert "25 %" in io.message
    unmeasured = Sample(t=T0 + 61, paths={SHARE: PathState(SHARE)}, process=proc({}))
    history.append(unmeasured)
    advisor(unmeasured, history)
    assert any("waiting on /mnt/share/runs" in f for f in unmeasured.headline.facts)
    quiet = Sample(
        t=T0 + 1000, paths={DATA: PathState(DATA)}, process=proc({DATA: {"read": 0.002}})
    )
    history.append(quiet)
    advisor(quiet, history)
    assert not any("waiting" in f for f in quiet.headline.facts)  # 0.2 %: not worth a word
    cpu_only = Sample(t=T0 + 62, paths={SHARE: PathState(SHARE)})  # no watched process
    advisor(cpu_only, history)
    assert not any("waiting" in f for f in cpu_only.headline.facts)


def test_the_call_named_is_the_one_that_took_the_time_not_one_that_came_once() -> None:
    """A call's series has entries only where it took time: two 60 % writes in 30 ticks of
    30 % fsync are 4 % of the time, not 60 %; the warning and the headline name fsync."""
    alerts = run(
        30, lambda i: proc({SHARE: {"fsync": 0.3, **({"write": 0.6} if i in (5, 6) else {})}})
    )
    (alert,) = alerts
    assert "mostly in fsync()" in alert.message, alert.message


def _kernel(cell_at: int | None, what: str = "cell") -> object:
    """A kernel idle until ``cell_at`` (no time on files), then a cell waiting 79 % of its
    time in fsync on the share."""

    def make(i: int) -> ProcessIO:
        busy = cell_at is not None and i >= cell_at
        p = proc({SHARE: {"fsync": 0.79}} if busy else {SHARE: {}})
        if cell_at is not None and i >= cell_at:
            p.running_since, p.running_what = T0 + cell_at, what
        return p

    return make


def test_judged_over_the_cell_not_the_idle_time_before_it() -> None:
    """ "21 % of the last 33 s" for a cell whose steps spent ~79 % in I/O, the window holding
    19 s of idle kernel before the cell (issue 36): the cell's own time, and said so."""
    (alert,) = run(33, _kernel(19))
    assert alert.severity == "warning"
    assert "79 % of the 14 s this cell has run" in alert.message, alert.message


def test_a_script_is_judged_over_its_life_and_a_long_run_over_the_window() -> None:
    (alert,) = run(33, _kernel(19, what="process"))
    assert "79 % of the 14 s it has run" in alert.message, alert.message
    (alert,) = run(90, _kernel(0))  # ran longer than the 60 s window
    assert "79 % of the last 59 s" in alert.message, alert.message  # the ticks measured
