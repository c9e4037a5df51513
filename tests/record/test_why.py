"""Why a run ended, told from the recorded history after the recorder restarted: a real
script dying of a full disk on a loop ext4, an OOM kill in a memory cgroup, and the honest
"no cause seen" when the timeline holds no evidence."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.record.scenarios import CLI, ENV, HOG, history, record_full_disk
from tests.record.scenarios import memory_cgroup as memory_cgroup  # a fixture
from tests.support.mounts import wait_until
from trainwatch_lab.core.model import Sample
from trainwatch_lab.core.record import Event, Store
from trainwatch_lab.core.record.events import EventWatch
from trainwatch_lab.core.record.why import endings, explain


@pytest.mark.parametrize("wrapped", [False, True], ids=["discovered", "run-wrapper"])
def test_a_script_dying_of_a_full_disk_is_explained_after_the_recorder_restarts(
    loop_ext4, tmp_path: Path, wrapped: bool
) -> None:
    disk = loop_ext4(size_mb=24)
    store = tmp_path / "state" / "history.sqlite"
    pid = record_full_disk(store, disk.mountpoint, tmp_path, wrapped)
    # by pid: the discovery sees the whole machine, where other tests' scripts may end too
    why = history(store, "why", str(pid))
    line = why.strip().splitlines()[0]
    print(line)  # (shown with -s: the sentence itself)
    assert re.match(r"train_until_full\.py ended at \d\d:\d\d:\d\d after \d+ s: ", line), line
    assert f"{disk.mountpoint}" in line and "was full (" in line, line
    assert "Errno 28" in line, line
    if wrapped or connector_opens():  # a discovered run's status: the process connector
        assert "exit status 1" in line, line
    assert len(why.strip().splitlines()) == 1  # the wrapper's and the discovery's end are one


def connector_opens() -> bool:
    """Whether this kernel lets us listen to the process connector (core.record.proc_connector)."""
    from trainwatch_lab.core.record.proc_connector import ProcExits

    exits = ProcExits()
    exits.watch(os.getpid())
    try:
        return exits.listening
    finally:
        exits.close()


def test_no_evidence_no_cause(tmp_path: Path) -> None:
    store = Store(str(tmp_path / "h.sqlite"), role="t")
    store.register()
    t = 1_800_000_000.0
    store.add_events(
        [
            Event(
                t,
                "process-ended",
                "train.py",
                "train.py (pid 7) ended",
                {"pid": 7, "started": t - 3600 * 5 - 600, "paths": ["/data"]},
            )
        ]
    )
    # another filesystem, not the run's, was full at that moment: no evidence about this run
    store.close_blocks({"path:/other:avail_bytes": ([t - 10, t - 5], [0.0, 0.0])})
    (ending,) = [explain(store, e) for e in endings(store, 0, 2e9)]
    assert ending.cause is None
    assert ending.sentence == "train.py ended at {} after 5 h 10 m; no cause seen".format(
        time.strftime("%H:%M:%S", time.localtime(t))
    )


def test_an_oom_kill_in_a_memory_cgroup_is_the_cause(tmp_path: Path, memory_cgroup: Path) -> None:
    store = tmp_path / "h.sqlite"
    inner = " ".join(
        [*CLI, "run", "--store", str(store), "--", sys.executable, "-c", repr(HOG.format(1))]
    )
    done = subprocess.run(
        ["sh", "-c", f"echo $$ > {memory_cgroup}/cgroup.procs; exec {inner}"],
        env=ENV,
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 128 + signal.SIGKILL, done.stderr
    why = history(store, "why")
    assert "out-of-memory killer ended it (oom_kill 0 -> 1 in cgroup" in why, why
    assert "killed by SIGKILL" in why


def test_a_kernel_killed_by_the_oom_killer_is_explained(
    tmp_path: Path, memory_cgroup: Path
) -> None:
    """A kernel's process (here a plain python in the cgroup, as the kernels source reports
    a kernel) started, then gone: its end carries the OOM kill, and `why` says so."""
    kernel = subprocess.Popen(
        [
            "sh",
            "-c",
            f"echo $$ > {memory_cgroup}/cgroup.procs; exec {sys.executable} -c {HOG.format(3)!r}",
        ]
    )
    try:
        assert wait_until(lambda: str(kernel.pid) in (memory_cgroup / "cgroup.procs").read_text())
        watch = EventWatch()
        info = {"k1": {"pid": kernel.pid, "name": "python3"}}
        started = watch.observe(Sample(t=time.time(), kernels=info))
        assert [e.kind for e in started] == ["kernel-started"]
        assert kernel.wait(timeout=60) == -signal.SIGKILL
    finally:
        kernel.kill()
    ended_events = watch.observe(Sample(t=time.time()))
    assert [e.kind for e in ended_events] == ["kernel-ended"]
    store = Store(str(tmp_path / "h.sqlite"), role="t")
    store.register()
    store.add_events(started + ended_events)
    (ending,) = [explain(store, e) for e in endings(store, 0, 2e9)]
    assert ending.sentence.startswith("kernel python3 ended at ")
    assert "the kernel's out-of-memory killer ended it (oom_kill 0 -> 1" in ending.sentence
    store.close()


def test_the_sentence_of_the_issue_full_disk_warned_and_sent(tmp_path: Path) -> None:
    """The issue's example, from a timeline that holds every piece of it."""
    store = Store(str(tmp_path / "h.sqlite"), role="t")
    store.register()
    end = 1_800_000_000.0
    warn = {"code": "disk-filling", "severity": "warning", "subject": "/data"}
    store.add_events(
        [
            Event(end - 1900, "warning-raised", "/data", "disk-filling: /data fills", warn),
            Event(
                end - 1899,
                "notification-sent",
                "/data",
                "disk-filling started: sent to slack",
                {"code": "disk-filling", "state": "started", "format": "slack"},
            ),
            Event(
                end,
                "process-ended",
                "train.py",
                "train.py (pid 7) ended",
                {
                    "pid": 7,
                    "started": end - 5 * 3600 - 600,
                    "paths": ["/data"],
                    "stderr_tail": ["OSError: [Errno 28] No space left on device"],
                },
            ),
        ]
    )
    store.close_blocks({"path:/data:avail_bytes": ([end - 12, end - 2], [8192.0, 0.0])})
    (ending,) = [explain(store, e) for e in endings(store, 0, 2e9)]
    at = time.strftime("%H:%M:%S", time.localtime(end))
    full_at = time.strftime("%H:%M:%S", time.localtime(end - 2))
    warned_at = time.strftime("%H:%M", time.localtime(end - 1900))
    assert ending.sentence == (
        f"train.py ended at {at} after 5 h 10 m: /data was full (0 B free at {full_at}; "
        f"disk-filling warned at {warned_at} and was sent to slack; "
        "stderr: OSError: [Errno 28] No space left on device)"
    )


def test_a_notifier_s_deliveries_become_events(tmp_path: Path) -> None:
    from tests.advice.test_notify import FULL, Webhook
    from trainwatch_lab.advice.notify import Notifier
    from trainwatch_lab.core.record import Recorder

    hook = Webhook()
    recorder = Recorder(str(tmp_path / "h.sqlite"), every=0.0)
    notifier = Notifier(hook.url, "slack")
    notifier.on_sent = recorder.notified(notifier.fmt)
    try:
        notifier(Sample(t=time.time(), warnings=[FULL]))
        assert wait_until(lambda: notifier.sent == 1)
    finally:
        notifier.close()
        recorder.close()
    store = Store(str(tmp_path / "h.sqlite"), readonly=True)
    (event,) = store.events(0, 2e9, kinds=["notification-sent"])
    assert event.subject == "/data" and event.text == "disk-almost-full started: sent to slack"
    store.close()


def test_an_oom_kill_counted_in_a_shared_cgroup_names_no_process(tmp_path: Path) -> None:
    store = Store(str(tmp_path / "h.sqlite"), role="t")
    store.register()
    t = 1_800_000_000.0
    oom = {"cgroup": "/sys/fs/cgroup/memory/user.slice", "before": 3, "after": 4}
    store.add_events(
        [
            Event(
                t,
                "process-ended",
                "train.py",
                "train.py (pid 7) ended",
                {"pid": 7, "oom_killed": oom},
            )
        ]
    )
    (ending,) = [explain(store, e) for e in endings(store, 0, 2e9)]
    assert ending.cause is None and "no cause seen" in ending.sentence
    assert "(another process there may have been the one killed)" in ending.sentence


def test_the_kernel_log_names_the_process_it_killed(tmp_path: Path) -> None:
    from trainwatch_lab.core.record.ended import kmsg_oom

    kmsg = tmp_path / "kmsg"  # a record in /dev/kmsg's format (the file is read in one go)
    kmsg.write_text(
        "3,1158,1000000,-;Memory cgroup out of memory: Killed process 4242 (python) "
        "total-vm:540884kB, anon-rss:65152kB\n"
    )
    assert kmsg_oom(4242, None, str(kmsg)) == (
        "Memory cgroup out of memory: Killed process 4242 (python)"
    )
    assert kmsg_oom(424, None, str(kmsg)) is None


def _ended_with_own_path_full(tmp_path: Path, **data: object) -> Store:
    """A run whose own path /data was at 0 B free just before it ended."""
    store = Store(str(tmp_path / "h.sqlite"), role="t")
    store.register()
    end = 1_800_000_000.0
    facts = {"pid": 7, "started": end - 3600, "paths": ["/data"], **data}
    store.add_events([Event(end, "run-ended", "train.py", "train.py (pid 7) ended", facts)])
    store.close_blocks({"path:/data:avail_bytes": ([end - 12, end - 2], [8192.0, 0.0])})
    return store


def test_a_run_that_exited_0_did_not_die_of_its_full_disk(tmp_path: Path) -> None:
    store = _ended_with_own_path_full(tmp_path, exit={"code": 0})
    gpu = {"code": "gpu-error", "subject": "0"}
    store.add_events([Event(1_800_000_000.0 - 60, "warning-raised", "0", "gpu-error: XID 79", gpu)])
    (ending,) = [explain(store, e) for e in endings(store, 0, 2e9)]
    assert ending.cause is None
    assert ending.sentence.endswith(": it exited normally (status 0)"), ending.sentence
    store.close()


def test_the_kernel_log_s_oom_kill_wins_over_a_full_disk(tmp_path: Path) -> None:
    logged = "Memory cgroup out of memory: Killed process 7 (python)"
    store = _ended_with_own_path_full(
        tmp_path, exit={"code": None, "signal": "SIGKILL"}, oom_logged=logged
    )
    (ending,) = [explain(store, e) for e in endings(store, 0, 2e9)]
    assert ending.cause == "the kernel's out-of-memory killer ended it", ending.sentence
    assert f"kernel log: {logged}" in ending.evidence
    store.close()


def test_another_run_s_full_disk_is_no_evidence(tmp_path: Path) -> None:
    """As root the discovery watches every training process on the machine: another run's
    disk, fuller than this run's at that moment, must not be named as this run's cause;
    this run's own disk (the mount above its checkpoint directory) is."""
    store = Store(str(tmp_path / "h.sqlite"), role="t")
    store.register()
    t = 1_800_000_000.0
    stderr = ["OSError: [Errno 28] No space left on device"]
    data = {"pid": 7, "started": t - 60, "paths": ["/data/ckpt"], "stderr_tail": stderr}
    store.add_events([Event(t, "process-ended", "train.py", "train.py (pid 7) ended", data)])
    store.close_blocks(
        {
            "path:/data:avail_bytes": ([t - 10, t - 5], [400_000.0, 120_000.0]),
            "path:/other/runs:avail_bytes": ([t - 10, t - 5], [100_000.0, 0.0]),
        }
    )
    (ending,) = [explain(store, e) for e in endings(store, 0, 2e9)]
    assert ending.cause == "/data was full", ending.sentence
    store.close()
    store = Store(str(tmp_path / "h2.sqlite"), role="t")
    store.register()
    store.add_events([Event(t, "process-ended", "train.py", "train.py (pid 7) ended", data)])
    store.close_blocks({"path:/other/runs:avail_bytes": ([t - 10, t - 5], [100_000.0, 0.0])})
    (ending,) = [explain(store, e) for e in endings(store, 0, 2e9)]
    assert ending.cause == "it ran out of disk space", ending.sentence  # stderr says so
    assert "/other/runs was full" not in ending.sentence
    store.close()


def _ends(tmp_path: Path, events: list[Event]) -> list:
    store = Store(str(tmp_path / "h.sqlite"), role="t")
    store.register()
    store.add_events(events)
    try:
        return [explain(store, e) for e in endings(store, 0, 2e9)]
    finally:
        store.close()


def test_a_kernel_found_by_the_discovery_too_ends_once_as_the_kernel(tmp_path: Path) -> None:
    """A kernel's process that a discovery took for a training "python" (another recorder's,
    or one pass before the kernel was listed): one process, one ending, the kernel's, in
    whichever order and however far apart the two records came."""
    t, started = 1_800_000_000.0, 1_799_999_000.0
    found = {"pid": 41, "started": started, "name": "python", "command": "python -m ipykernel"}
    kernel = {"pid": 41, "started": started, "name": "kernel python3", "kernel": "k1"}
    asked = {**kernel, "requested": "shutdown", "asked_by": "client"}
    for first, then, gap in (
        (Event(t, "process-ended", "python", "python (pid 41) ended", found), "kernel", 0.4),
        (Event(t, "kernel-ended", "kernel python3", "ended", asked), "process", 0.4),
        (Event(t, "process-ended", "python", "python (pid 41) ended", found), "kernel", 90.0),
    ):
        second = (
            Event(t + gap, "kernel-ended", "kernel python3", "ended", asked)
            if then == "kernel"
            else Event(t + gap, "process-ended", "python", "python (pid 41) ended", found)
        )
        (end,) = _ends(tmp_path / f"{then}{gap}", [first, second])
        assert end.name == "kernel python3" and end.data["name"] == "kernel python3"
        assert end.data["kernel"] == "k1" and end.data["requested"] == "shutdown"
        assert end.sentence.startswith("kernel python3 was shut down at ") and not end.badly


def test_a_pid_reused_by_another_process_is_another_ending(tmp_path: Path) -> None:
    t = 1_800_000_000.0
    old = {"pid": 41, "started": t - 600, "exit": {"code": 1}}
    new = {"pid": 41, "started": t + 1, "exit": {"code": 1}}
    ends = _ends(
        tmp_path,
        [
            Event(t, "process-ended", "a.py", "a.py (pid 41) ended", old),
            Event(t + 20, "process-ended", "b.py", "b.py (pid 41) ended", new),
        ],
    )
    assert [e.name for e in ends] == ["a.py", "b.py"]


# -- the cause agrees with the evidence it cites (issue 35 items 4, 6, 7) -------------------
NOSPACE = "OSError: [Errno 28] No space left on device: 'ckpt/step-190.pt'"
T = 1_800_000_000.0


def _one(tmp_path: Path, data: dict, avail: dict | None = None, kind: str = "run-ended"):
    """The ending of one run with ``data``, its paths' free space recorded as ``avail``."""
    store = Store(str(tmp_path / "h.sqlite"), role="t")
    store.register()
    store.add_events([Event(T, kind, "train.py", "train.py (pid 7) ended", {"pid": 7, **data})])
    if avail:
        store.close_blocks(avail)
    try:
        (ending,) = [explain(store, e) for e in endings(store, 0, 2e9)]
    finally:
        store.close()
    return ending


ROOMY = {"path:/data:avail_bytes": ([T - 60, T - 2], [79.7e9, 79.7e9])}


def test_an_earlier_errno_28_is_not_the_cause_of_a_nan_exit(tmp_path: Path) -> None:
    data = {
        "started": T - 600,
        "paths": ["/data"],
        "exit": {"code": 1},
        "stderr_tail": [NOSPACE, "retrying the save", "loss is nan at step 200"],
    }
    ending = _one(tmp_path, data, ROOMY)
    assert ending.cause is None, ending.sentence
    assert "ran out of disk space" not in ending.sentence
    assert ending.sentence.endswith(
        "; no cause seen (exit status 1; last stderr line: loss is nan at step 200)"
    ), ending.sentence


def test_an_errno_28_before_a_kill_9_is_not_the_cause(tmp_path: Path) -> None:
    """The Errno 28 line is the last, but an admin's kill -9 ended the run, with 79.7 GB free."""
    kill = {"code": None, "signal": "SIGKILL"}
    data = {"started": T - 600, "paths": ["/data"], "exit": kill, "stderr_tail": [NOSPACE]}
    ending = _one(tmp_path, data, ROOMY)
    assert ending.cause is None and "killed by SIGKILL" in ending.sentence, ending.sentence
    assert "79.7 GB" not in ending.sentence
    # nor with its disk full at that moment: the signal, not the disk, ended it
    full = {"path:/data:avail_bytes": ([T - 10, T - 2], [8192.0, 0.0])}
    ending = _one(tmp_path / "full", data, full)
    assert ending.cause is None, ending.sentence
    assert "killed by SIGKILL; /data was full (0 B free at" in ending.sentence


def test_an_errno_28_that_ended_the_run_with_no_full_watched_path(tmp_path: Path) -> None:
    """Its last line is Errno 28, its watched path kept 79.7 GB: the disk that filled is one
    not watched (/dev/shm), and the sentence says so instead of citing the roomy one as if
    it were the evidence."""
    data = {"started": T - 600, "paths": ["/data"], "exit": {"code": 1}, "stderr_tail": [NOSPACE]}
    ending = _one(tmp_path, data, ROOMY)
    assert ending.cause == "it ran out of disk space", ending.sentence
    assert "not on its watched /data, whose least free space was 79.7 GB" in ending.sentence


def test_a_full_disk_before_the_run_started_is_not_its_evidence(tmp_path: Path) -> None:
    """The issue's `run --`: /old/tb (the previous run's, deleted since) was at 0 B 19 s
    before this run started; this run ended 28 s in, of its own Errno 28 elsewhere."""
    data = {"started": T - 28, "exit": {"code": 1}, "stderr_tail": [NOSPACE]}
    avail = {"path:/old/tb:avail_bytes": ([T - 47, T - 40], [0.0, 0.0])}
    ending = _one(tmp_path, data, avail)
    assert ending.cause == "it ran out of disk space", ending.sentence
    assert "/old/tb" not in ending.sentence
    # the same reading inside its lifetime is evidence: of the run's own disk when /old/tb
    # is its path; with its paths unknown (a `run` the discovery did not see), said as
    # maybe another run's, never its cause
    ending = _one(tmp_path / "own", {**data, "started": T - 60, "paths": ["/old/tb"]}, avail)
    assert ending.cause == "/old/tb was full", ending.sentence
    ending = _one(tmp_path / "inside", {**data, "started": T - 60}, avail)
    assert ending.cause == "it ran out of disk space", ending.sentence
    assert "a watched path, maybe another run's: /old/tb was full (0 B free at" in (ending.sentence)


def test_the_wrapper_s_empty_paths_do_not_hide_the_discovery_s(tmp_path: Path) -> None:
    """`run` records "paths": [] (it knows none); the discovery's record of the same process
    knows them: merged, the run's own disk is named, not another run's full tmpfs."""
    store = Store(str(tmp_path / "h.sqlite"), role="t")
    store.register()
    seen = {"pid": 7, "started": T - 25, "paths": ["/mnt/runs"], "start_ticks": 1}
    wrapped = {"pid": 7, "started": T - 24.5, "paths": [], "exit": {"code": 1}}
    wrapped["stderr_tail"] = [NOSPACE]
    store.add_events(
        [
            Event(T, "process-ended", "train.py", "train.py (pid 7) ended", seen),
            Event(T + 0.01, "run-ended", "train.py", "train.py (pid 7) ended", wrapped),
        ]
    )
    store.close_blocks(
        {
            "path:/mnt:avail_bytes": ([T - 10, T - 1], [9e5, 1e5]),
            "path:/other/tmpfs/runs:avail_bytes": ([T - 20, T - 15], [0.0, 0.0]),
        }
    )
    (ending,) = [explain(store, e) for e in endings(store, 0, 2e9)]
    store.close()
    assert ending.data["paths"] == ["/mnt/runs"]
    assert ending.cause == "/mnt was full", ending.sentence
    assert "/other/tmpfs" not in ending.sentence


def test_a_log_earlier_runs_appended_to_gives_only_this_run_s_lines(tmp_path: Path) -> None:
    """nohup.out (opened with O_APPEND) keeps the previous run's Errno 28; this run's end
    reads only the lines since its first sight. A log opened afresh (``> log``) is all its."""
    from trainwatch_lab.core.record import ended

    log = tmp_path / "nohup.out"
    log.write_text(f"step 1\n{NOSPACE}\n")
    script = "import sys, time; time.sleep(60)"
    for mode, kept in (("ab", ["step 1", "loss is nan at step 200"]), ("wb", None)):
        with open(log, mode) as out:
            proc = subprocess.Popen([sys.executable, "-c", script], stderr=out)
        try:
            seen = {"pid": proc.pid, **ended.at_start(proc.pid)}
            assert seen["stderr"] == str(log)
            with open(log, "a") as fh:
                fh.write("step 1\nloss is nan at step 200\n")
        finally:
            proc.kill()
            proc.wait()
        tail = ended.at_end(seen)["stderr_tail"]
        if kept is None:  # truncated when it started: every line is its own
            assert seen["stderr_from"] == 0 and tail == ["step 1", "loss is nan at step 200"]
        else:
            assert tail == kept and NOSPACE not in tail
            log.write_text("truncated and rewritten\n")  # shorter than the offset: read whole
            assert ended.at_end(seen)["stderr_tail"] == ["truncated and rewritten"]
            log.write_text(f"step 1\n{NOSPACE}\n")


def _kmsg(tmp_path: Path, *records: str) -> str:
    path = tmp_path / "kmsg"
    path.write_text("".join(records))
    return str(path)


def test_an_oom_kill_the_kernel_log_gives_to_another_process_is_not_the_cause(
    tmp_path: Path,
) -> None:
    """Injected kernel log and cgroup files (the real cgroup: the next test): the count rose
    while the run was SIGKILLed, and the log says the killer took pid 99, not 7."""
    from trainwatch_lab.core.record import ended

    group = tmp_path / "sys/fs/cgroup/memory/job"
    group.mkdir(parents=True)
    (group / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 2\n")
    kmsg = _kmsg(
        tmp_path,
        "6,1,1000,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,"
        "mems_allowed=0,oom_memcg=/job,task_memcg=/job,task=python,pid=99,uid=0\n",
        "3,2,1000,-;Memory cgroup out of memory: Killed process 99 (python) total-vm:1kB\n",
        "6,3,1000,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,"
        "mems_allowed=0,oom_memcg=/elsewhere,task_memcg=/elsewhere,task=x,pid=98,uid=0\n",
        "3,4,1000,-;Memory cgroup out of memory: Killed process 98 (x) total-vm:1kB\n",
    )
    seen = {"pid": 7, "cgroup": {"version": "1", "dir": str(group)}, "oom_kills": 1}
    facts = ended.at_end(seen, kmsg=kmsg)
    assert facts["oom_log_read"] is True and "oom_logged" not in facts
    assert facts["oom_others"] == ["Memory cgroup out of memory: Killed process 99 (python)"]
    kill = {"code": None, "signal": "SIGKILL"}
    ending = _one(tmp_path, {**facts, "exit": kill})
    assert ending.cause is None, ending.sentence
    assert (
        "oom_kill 1 -> 2 in cgroup " + str(group) + ": another process there was killed "
        "(kernel log: Memory cgroup out of memory: Killed process 99 (python))"
    ) in ending.sentence
    # the log names the run itself: the cause
    facts = ended.at_end({**seen, "pid": 99}, kmsg=kmsg)
    ending = _one(tmp_path / "own", {**facts, "exit": kill})
    assert ending.cause == "the kernel's out-of-memory killer ended it", ending.sentence
    # a log that cannot be read (not root): its own SIGKILL with the count, and it says so
    facts = ended.at_end(seen, kmsg=str(tmp_path / "absent"))
    assert facts["oom_log_read"] is False
    ending = _one(tmp_path / "unread", {**facts, "exit": kill})
    assert ending.cause == "the kernel's out-of-memory killer ended it"
    assert "the kernel log, readable as root, was not read" in ending.sentence


def test_an_admin_s_kill_9_after_another_process_s_oom_kill_in_its_cgroup(
    tmp_path: Path, memory_cgroup: Path
) -> None:
    """The issue's case for real: A runs under `run` in a memory cgroup, a hog B there is
    OOM-killed (oom_kill 0 -> 1), then A is killed with kill -9. The kernel log names B."""
    limit = "memory.max" if (memory_cgroup / "memory.max").exists() else "memory.limit_in_bytes"
    (memory_cgroup / limit).write_text(str(256 << 20))  # room for A and its wrapper
    store = tmp_path / "h.sqlite"
    inner = " ".join(
        [
            *CLI,
            "run",
            "--store",
            str(store),
            "--",
            sys.executable,
            "-c",
            "'import time; time.sleep(120)'",
        ]
    )
    wrapper = subprocess.Popen(
        ["sh", "-c", f"echo $$ > {memory_cgroup}/cgroup.procs; exec {inner}"],
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        children = Path(f"/proc/{wrapper.pid}/task/{wrapper.pid}/children")
        assert wait_until(lambda: children.read_text().split() != [], timeout=60)
        child = int(children.read_text().split()[0])
        assert wait_until(lambda: "run-started" in history(store, "events"), timeout=60)
        hog = subprocess.run(
            [
                "sh",
                "-c",
                f"echo $$ > {memory_cgroup}/cgroup.procs; exec {sys.executable} -c "
                f"{HOG.format(0)!r}",
            ],
            timeout=120,
        )
        assert hog.returncode == -signal.SIGKILL
        os.kill(child, signal.SIGKILL)
        assert wrapper.wait(timeout=60) == 128 + signal.SIGKILL
    finally:
        wrapper.kill()
    why = history(store, "why")
    print(why)
    assert "out-of-memory killer ended it" not in why, why
    assert "killed by SIGKILL" in why and "no cause seen" in why, why
    assert "oom_kill 0 -> 1 in cgroup" in why and "another process there was killed" in why, why
    assert f"Killed process {child} " not in why


def test_an_oom_kill_s_cgroup_in_the_log_is_matched_to_the_run_s() -> None:
    """The log's oom_memcg ("/a") against the run's memory cgroup directory: v1 under its
    own mount (/sys/fs/cgroup/memory/...), v2 at the root, a v2 group named memory-like."""
    from trainwatch_lab.core.record.ended import _within

    v1 = {"version": "1", "dir": "/sys/fs/cgroup/memory/job/step"}
    assert _within(v1, "/job") and _within(v1, "/job/step") and _within(v1, "/")
    assert not _within(v1, "/other") and not _within(v1, "/jo")
    v2 = {"version": "2", "dir": "/sys/fs/cgroup/memoryhog/x"}
    assert _within(v2, "/memoryhog") and not _within(v2, "/x")
    assert _within({"version": "2", "dir": "/host/sys/fs/cgroup/user.slice/u"}, "/user.slice")
    assert _within(v2, None)  # a log that names no cgroup could be anywhere


def test_an_ending_says_which_run_it_was_and_that_is_redacted() -> None:
    """The cards read "python ended at 23:33:5x ... no cause seen" three times with nothing
    to tell the runs apart (issue 36): the ending carries the command and folder, through
    the one redaction like every reply."""
    from trainwatch_lab.core.record.export import redact
    from trainwatch_lab.core.record.why import Ending

    data = {"command": "python train.py --hf-token abc --lr 3", "cwd": "/root/exp1"}
    shown = redact(Ending("python", 42, 1.0, data).to_json())
    assert shown["cwd"] == "/root/exp1" and shown["notebook"] is None
    assert (
        shown["command"].startswith("python train.py --hf-token ") and "abc" not in shown["command"]
    )
