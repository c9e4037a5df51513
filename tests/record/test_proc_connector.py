"""The exit status of a process we did not start, from the kernel's process connector
(issue 27, item 4): parsing of hand-built netlink messages, the real socket as root, and a
recorder that writes the status of a discovered training script's end."""

from __future__ import annotations

import errno
import os
import re
import signal
import socket
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.env import need_root
from tests.support.mounts import wait_until
from trainwatch_lab.core.record import proc_connector as pc
from trainwatch_lab.core.record.proc_connector import Exit, ProcExits, parse

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "trainwatch_lab"]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
PROC_EVENT_FORK = 0x00000001
BOOT = 1_700_000_000.0


def message(
    what: int = pc.PROC_EVENT_EXIT,
    pid: int = 4242,
    tgid: int | None = None,
    status: int = 9,
    stamp_ns: int = 5_000_000_000,
    idx: int = pc.CN_IDX_PROC,
    extra: bytes = b"\0" * 8,  # parent_pid, parent_tgid (kernels since 4.18)
    cn_len: int | None = None,
    nl_len: int | None = None,
) -> bytes:
    """One netlink message as the kernel sends a proc_event (see linux/cn_proc.h)."""
    body = pc.PROC_EVENT.pack(what, 1, stamp_ns)
    body += pc.EXIT_EVENT.pack(pid, pid if tgid is None else tgid, status, 17) + extra
    cn = pc.CN_MSG.pack(idx, pc.CN_VAL_PROC, 7, 0, len(body) if cn_len is None else cn_len, 0)
    payload = cn + body
    length = pc.NLMSGHDR.size + len(payload) if nl_len is None else nl_len
    return pc.NLMSGHDR.pack(length, pc.NLMSG_DONE, 0, 7, 0) + payload


def test_an_exit_is_read_with_its_status_and_time() -> None:
    (found,) = parse(message(status=3 << 8), BOOT)
    assert found == Exit(4242, 3 << 8, BOOT + 5.0)
    assert found.to_json() == {"code": 3}
    (killed,) = parse(message(status=signal.SIGKILL), BOOT)
    assert killed.to_json() == {"code": None, "signal": "SIGKILL", "core": False}
    (dumped,) = parse(message(status=signal.SIGSEGV | 0x80), BOOT)
    assert dumped.to_json() == {"code": None, "signal": "SIGSEGV", "core": True}


def test_an_older_kernel_s_shorter_exit_event_is_read() -> None:
    (found,) = parse(message(extra=b""), BOOT)
    assert found.pid == 4242


def test_two_messages_in_one_datagram() -> None:
    first = message(pid=10, status=0)
    first += b"\0" * (-len(first) % 4)  # NLMSG_ALIGN
    found = list(parse(first + message(pid=11, status=1 << 8), BOOT))
    assert [(e.pid, e.to_json()) for e in found] == [(10, {"code": 0}), (11, {"code": 1})]


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(message(what=PROC_EVENT_FORK), id="a-fork"),
        pytest.param(message(what=0), id="the-listen-ack"),
        pytest.param(message(pid=4243, tgid=4242), id="a-thread-of-the-process"),
        pytest.param(message(idx=2), id="another-connector"),
        pytest.param(message()[:-5], id="truncated"),
        pytest.param(message()[:10], id="shorter-than-a-header"),
        pytest.param(message(nl_len=8), id="netlink-length-under-its-header"),
        pytest.param(message(nl_len=4096), id="netlink-length-past-the-data"),
        pytest.param(message(cn_len=200), id="connector-length-past-the-message"),
        pytest.param(message(cn_len=8), id="connector-length-under-an-exit"),
        pytest.param(message(pid=0), id="pid-0"),
        pytest.param(b"", id="empty"),
    ],
)
def test_anything_but_a_process_s_exit_is_skipped(data: bytes) -> None:
    assert list(parse(data, BOOT)) == []


def test_a_bad_message_does_not_hide_a_good_one_before_it() -> None:
    good = message(pid=12, status=0)
    good += b"\0" * (-len(good) % 4)
    assert [e.pid for e in parse(good + message(nl_len=4096), BOOT)] == [12]


ACK = 0x5EED


def ack(err: int, sent: int = ACK) -> bytes:
    """The kernel's answer to a subscription sent with ack ``sent`` (PROC_EVENT_NONE, ack
    ``sent`` + 1, a seq of the kernel's own, event_data.ack.err)."""
    body = pc.PROC_EVENT.pack(pc.PROC_EVENT_NONE, 0, 1) + struct.pack("=I", err) + b"\0" * 20
    cn = pc.CN_MSG.pack(pc.CN_IDX_PROC, pc.CN_VAL_PROC, 151299, sent + 1, len(body), 0) + body
    return pc.NLMSGHDR.pack(pc.NLMSGHDR.size + len(cn), pc.NLMSG_DONE, 0, 0, 0) + cn


def test_the_filtered_subscription_only_where_the_kernel_takes_it() -> None:
    assert pc.filtering("6.6.0") and pc.filtering("6.18.44-fc-v1098")
    assert not pc.filtering("6.5.13") and not pc.filtering("5.15.0-91-generic")
    assert not pc.filtering("weird")
    plain, filtered = pc.listen_message(5), pc.listen_message(5, only_exits=True)
    assert len(filtered) == len(plain) + 4  # struct proc_input: op and the event filter
    assert struct.unpack_from("=II", filtered, 36) == (1, pc.PROC_EVENT_EXIT)


def test_a_refused_subscription_is_told_by_its_ack() -> None:
    """An older kernel answers a subscription without CAP_NET_ADMIN with EPERM in the
    ack (and sends nothing after): that is a refusal, not a quiet machine."""
    assert pc.refusal(ack(errno.EPERM), ACK) == errno.EPERM
    assert pc.refusal(ack(0), ACK) is None  # accepted
    assert pc.refusal(ack(errno.EPERM, sent=0), ACK) is None  # another's refusal
    assert pc.refusal(message(status=9), ACK) is None  # an exit is no answer
    assert pc.refusal(ack(errno.EPERM)[:-30], ACK) is None  # truncated: not framed
    assert list(parse(ack(errno.EPERM), BOOT)) == []


def test_an_unavailable_connector_is_one_debug_line_and_no_error(monkeypatch, caplog) -> None:
    def refuse(*args, **kwargs):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(pc.socket, "socket", refuse)
    exits = ProcExits()
    with caplog.at_level("DEBUG", logger=pc.__name__):
        exits.watch(os.getpid())
        exits.watch(os.getpid())
    assert not exits.available and not exits.listening
    assert exits.take(os.getpid()) is None
    # ours only: a pending task of an earlier test, garbage-collected here, logs through asyncio
    (record,) = [r for r in caplog.records if r.name.startswith("trainwatch_lab")]
    assert record.levelname == "DEBUG"


def connector() -> None:
    """Root, and a kernel that opens the connector: else skip, with the errno as reason
    (even under CI: a container's kernel may refuse it, which is no fault of ours)."""
    need_root()
    try:
        sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, pc.NETLINK_CONNECTOR)
        try:
            sock.bind((0, pc.CN_IDX_PROC))
            sock.send(pc.listen_message(sock.getsockname()[0]))
            sock.send(pc.listen_message(sock.getsockname()[0], pc.PROC_CN_MCAST_IGNORE))
        finally:
            sock.close()
    except OSError as exc:
        pytest.skip(f"the kernel refuses the process connector: errno {exc.errno} ({exc})")


@pytest.mark.parametrize(
    ("code", "want"),
    [
        ("import time; time.sleep(60)", {"code": None, "signal": "SIGKILL", "core": False}),
        ("import sys; sys.exit(3)", {"code": 3}),
    ],
    ids=["sigkill", "exit-3"],
)
def test_the_kernel_tells_the_status_of_a_watched_process(code: str, want: dict) -> None:
    connector()
    exits = ProcExits()
    gate = os.pipe()
    child = subprocess.Popen(
        [sys.executable, "-c", f"import os; os.read({gate[0]}, 1); {code}"], pass_fds=[gate[0]]
    )
    try:
        exits.watch(child.pid)
        assert exits.listening
        os.write(gate[1], b"x")  # watched before it can end
        if want.get("signal"):
            child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
        found = exits.take(child.pid)
        assert found is not None and found.to_json() == want
        assert not exits.listening  # nothing watched: the socket is closed
    finally:
        child.kill()
        os.close(gate[0])
        os.close(gate[1])
        exits.close()


TRAINER = """\
import os, signal, sys, time
os.makedirs("runs", exist_ok=True)
events = open("runs/events.out.tfevents.1.host", "wb")  # the discovery lists it
while not os.path.exists("go"):
    time.sleep(0.05)
sys.exit(3)
"""


@pytest.mark.slow  # a real `watch --record` and a script run to their end, ~20 s
def test_a_discovered_script_s_end_is_recorded_with_its_status(tmp_path: Path) -> None:
    """A script not started by `trainwatch-lab run` (no parent of ours): one ends with
    exit status 3, one is killed with SIGKILL; `history why` tells each."""
    connector()
    store = tmp_path / "state" / "history.sqlite"
    watch = subprocess.Popen(
        [
            *CLI,
            "watch",
            "--processes",
            "--interval",
            "0.5",
            "--record",
            "--record-every",
            "0.5",
            "--store",
            str(store),
            "--json",
            str(tmp_path),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=ENV,
    )
    runs = {}
    try:
        for name in ("exits.py", "killed.py"):
            (tmp_path / name).mkdir()
            (tmp_path / name / name).write_text(TRAINER)
            runs[name] = subprocess.Popen(
                [sys.executable, name],
                cwd=tmp_path / name,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )

        def events() -> str:
            done = subprocess.run(
                [*CLI, "history", "events", "--store", str(store), "--format", "csv"],
                capture_output=True,
                text=True,
                env=ENV,
                timeout=60,
            )
            return done.stdout if done.returncode == 0 else ""

        def seen(kind: str) -> bool:
            assert watch.poll() is None, watch.stderr.read().decode()
            text = events()
            return all(f"{kind},{n},{n} (pid {p.pid})" in text for n, p in runs.items())

        assert wait_until(lambda: seen("process-seen"), timeout=120), events()
        (tmp_path / "exits.py" / "go").touch()
        runs["killed.py"].send_signal(signal.SIGKILL)
        assert runs["exits.py"].wait(timeout=60) == 3
        assert runs["killed.py"].wait(timeout=60) == -signal.SIGKILL
        assert wait_until(lambda: seen("process-ended"), timeout=120), events()
    finally:
        for proc in runs.values():
            proc.kill()
        watch.send_signal(signal.SIGKILL)
        watch.wait(timeout=30)
    why = subprocess.run(
        [*CLI, "history", "why", "--store", str(store)],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=60,
    ).stdout
    lines = {line.split(" ", 1)[0]: line for line in why.strip().splitlines()}
    pattern = r"{} ended at \d\d:\d\d:\d\d after \d+ s; no cause seen \({}\)"
    assert re.match(pattern.format("exits.py", "exit status 3"), lines["exits.py"]), why
    assert re.match(pattern.format("killed.py", "killed by SIGKILL"), lines["killed.py"]), why
