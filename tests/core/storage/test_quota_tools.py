"""Lustre and NFS quotas through their tools (core.storage.quota_tools).

There is no Lustre here and this kernel has no NFS client (CONFIG_NETWORK_FILESYSTEMS is off),
so no real server answers: the parsers are tested on the rows the tools print (laid out with
the printf formats of lustre/utils/lfs.c ``print_quota`` and quota-tools' quota.c
``showquotas``, and stderr captured from Debian's quota 4.06), and the runner against fake
``lfs``/``quota`` executables on PATH that print such rows, or hang.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from tests.advice.test_storage import run
from tests.support.mounts import wait_until
from trainwatch_lab.advice.storage import disk_almost_full
from trainwatch_lab.core.defaults import DEFAULTS, GIB, MIB
from trainwatch_lab.core.model import Sample
from trainwatch_lab.core.storage import quota_tools
from trainwatch_lab.core.storage.fstypes import fs_magic
from trainwatch_lab.core.storage.quota import process_ids, read_quotas
from trainwatch_lab.core.storage.quota_tools import ToolQuotas, command, parse_row

try:
    from trainwatch_lab.core.paths.source import PathsSource
except ImportError:  # before core.paths.names was split
    from trainwatch_lab.core.paths.names import PathsSource

KIB = 1024


def columns(used: str, over: str, soft: str, hard: str, grace: str) -> str:
    """`` %7s%c %6s %7s %7s``: one group of columns in both tools' printf."""
    return f" {used:>7}{over} {soft:>6} {hard:>7} {grace:>7}"


def lfs_row(mnt: str, blocks: tuple[str, ...], files: tuple[str, ...]) -> str:
    """One row as lfs.c prints it: ``%15s`` (or the mount point alone on its line when it is
    longer), then the block and the file columns."""
    head = f"{mnt}\n{'':15}" if len(mnt) > 15 else f"{mnt:>15}"
    return head + columns(*blocks) + columns(*files) + "\n"


# lfs quota -q -u 1000 /mnt/lustre: 48234496 KiB used of a 50 GiB hard limit (4 GiB left),
# no soft limit, no inode limit, nothing over
LFS_USER = lfs_row(
    "/mnt/lustre", ("48234496", " ", "0", "52428800", "-"), ("1021", " ", "0", "0", "-")
)
# a group over its soft limit in grace (the '*' right after the count, the grace left), an
# OST that did not answer (the count in brackets), a mount point longer than 15 characters
LFS_GROUP_LONG = (
    lfs_row(
        "/lustre/scratch-project",
        ("[9437184]", "*", "8388608", "10485760", "6d23h59m"),
        ("5", " ", "100", "200", "-"),
    )
    + "Some errors happened when getting quota info. Some devices may be not working or "
    'deactivated. The data in "[]" is inaccurate.\n'
)
# quota -w -p -v -Q --show-mntpoint --hide-device --filesystem=/home -u 1000 (an NFS home):
# the heading, the column titles (``%15s%8s %7s%8s%8s%8s %7s%8s%8s``), then ``%15s`` and the
# two groups of columns; -p prints the grace as seconds ("0": none running)
QUOTA_HEADER = (
    "Disk quotas for user alice (uid 1000): \n"
    f"{'Filesystem':>15}{'blocks':>8} {'quota':>7}{'limit':>8}{'grace':>8}"
    f"{'files':>8} {'quota':>7}{'limit':>8}{'grace':>8}\n"
)
QUOTA_USER = (
    QUOTA_HEADER
    + f"{'/home':>15}"
    + columns("1048580", "*", "1048576", "2097152", "1767225600")
    + columns("3012", " ", "0", "0", "0")
    + "\n"
)
QUOTA_NONE = "Disk quotas for user bob (uid 1001): none\n"
# stderr of Debian's quota 4.06 for a filesystem without quotas, as captured here
QUOTA_NOT_ENABLED = (
    "quota: Mountpoint (or device) / not found or has no quota enabled.\n"
    "quota: Not all specified mountpoints are using quota.\n"
)


# -- the parsers -------------------------------------------------------------------------
def test_lfs_row_gives_the_space_left_under_the_limit() -> None:
    row = parse_row(LFS_USER, "/mnt/lustre")
    assert row == {
        "limit_bytes": 52428800 * KIB,
        "used_bytes": 48234496 * KIB,
        "inode_limit": None,
        "inodes_used": 1021,
    }
    assert row["limit_bytes"] - row["used_bytes"] == 4 * GIB  # type: ignore[operator]


def test_lfs_long_mount_point_brackets_and_grace() -> None:
    row = parse_row(LFS_GROUP_LONG, "/lustre/scratch-project")
    assert row is not None
    assert row["limit_bytes"] == 8388608 * KIB  # the soft limit stops writes first
    assert row["used_bytes"] == 9437184 * KIB and row["inode_limit"] == 100


def test_quota_row_and_none() -> None:
    row = parse_row(QUOTA_USER, "/home")
    assert row == {
        "limit_bytes": 1048576 * KIB,
        "used_bytes": 1048580 * KIB,
        "inode_limit": None,
        "inodes_used": 3012,
    }
    assert parse_row(QUOTA_NONE, "/home") is None
    assert parse_row(QUOTA_USER, "/ho") is None  # a row for another mount is not ours
    assert parse_row(QUOTA_USER, "/home/alice") is None


def test_commands_ask_for_one_kind_by_number() -> None:
    assert command("lfs", "project", 7, "/mnt/lustre") == [
        "lfs", "quota", "-q", "-p", "7", "/mnt/lustre",
    ]  # fmt: skip
    argv = command("quota", "group", 100, "/home")
    assert argv[0] == "quota" and argv[-3:] == ["--filesystem=/home", "-g", "100"]
    assert {"-w", "-p", "--show-mntpoint", "--hide-device"} <= set(argv)


# -- the runner, against fake tools on PATH -------------------------------------------------
FAKE = """#!{python} -S
import json, os, sys, time
tool = os.path.basename(sys.argv[0])
here = os.environ["FAKE_QUOTA_DIR"]
with open(os.path.join(here, "calls"), "a") as f:
    f.write(json.dumps(sys.argv) + "\\n")
if os.path.exists(os.path.join(here, tool + ".hang")):
    with open(os.path.join(here, tool + ".pid"), "w") as f:
        f.write(str(os.getpid()))
    time.sleep(120)
if os.path.exists(os.path.join(here, tool + ".slow")):
    time.sleep(1.0)  # a server that answers, slowly
flag = sys.argv[3] if tool == "lfs" else sys.argv[-2]
out = os.path.join(here, tool + flag)
if os.path.exists(out + ".err"):
    sys.stderr.write(open(out + ".err").read())
    sys.exit(1)
sys.stdout.write(open(out).read() if os.path.exists(out) else "")
"""


class FakeTools:
    def __init__(self, here: Path) -> None:
        self.here = here

    def prints(self, tool: str, flag: str, text: str, err: bool = False) -> None:
        (self.here / f"{tool}{flag}{'.err' if err else ''}").write_text(text)

    def hangs(self, tool: str) -> None:
        (self.here / f"{tool}.hang").touch()

    def slow(self, tool: str) -> None:
        (self.here / f"{tool}.slow").touch()

    def calls(self) -> list[list[str]]:
        path = self.here / "calls"
        return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []

    def hung_pid(self, tool: str) -> int | None:
        path = self.here / f"{tool}.pid"
        return int(path.read_text()) if path.exists() else None


@pytest.fixture
def fake_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeTools]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("lfs", "quota"):
        exe = bin_dir / tool
        exe.write_text(FAKE.format(python=sys.executable))
        exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_QUOTA_DIR", str(tmp_path))
    fakes = FakeTools(tmp_path)
    yield fakes
    pid = fakes.hung_pid("lfs") or fakes.hung_pid("quota")
    if pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)  # the fake we started, by its id


QUICK = replace(DEFAULTS, quota_tool_wait_s=5.0, quota_tool_timeout_s=2.0)


def test_lfs_runs_per_kind_and_the_tightest_binds(fake_tools: FakeTools) -> None:
    fake_tools.prints("lfs", "-u", LFS_USER)
    fake_tools.prints("lfs", "-g", "")  # no row: no group limit
    answer = ToolQuotas(QUICK).read("lfs", "/mnt/lustre", {"user": 1000, "group": 100})
    assert answer["quotas"] == [
        {"kind": "user", "id": 1000, **parse_row(LFS_USER, "/mnt/lustre")}  # type: ignore[dict-item]
    ]
    assert [c[1:] for c in fake_tools.calls()] == [
        ["quota", "-q", "-u", "1000", "/mnt/lustre"],
        ["quota", "-q", "-g", "100", "/mnt/lustre"],
    ]


def test_nfs_quota_asks_no_project_and_says_why_there_is_none(fake_tools: FakeTools) -> None:
    fake_tools.prints("quota", "-u", QUOTA_NOT_ENABLED, err=True)
    fake_tools.prints("quota", "-g", QUOTA_NONE)
    answer = ToolQuotas(QUICK).read("quota", "/", {"user": 0, "group": 0, "project": 5})
    assert answer["quotas"] == []
    assert answer["none"] == (
        "`quota`: Mountpoint (or device) / not found or has no quota enabled.; no group limit"
    )
    assert [c[-2] for c in fake_tools.calls()] == ["-u", "-g"]  # rquota knows no projects


def test_a_fresh_answer_is_reused_and_a_stale_one_refreshed_behind(
    fake_tools: FakeTools,
) -> None:
    fake_tools.prints("quota", "-u", QUOTA_USER)
    tools = ToolQuotas(replace(QUICK, quota_tool_every_s=3600.0))
    first = tools.read("quota", "/home", {"user": 1000})
    assert tools.read("quota", "/home", {"user": 1000}) == first
    assert len(fake_tools.calls()) == 1  # one run for both reads
    tools.defaults = replace(QUICK, quota_tool_every_s=0.0)
    assert tools.read("quota", "/home", {"user": 1000}) == first  # the last answer, at once
    assert wait_until(lambda: len(fake_tools.calls()) == 2, 10)  # refreshed behind


def test_a_hanging_tool_blocks_no_read_and_is_reported(fake_tools: FakeTools) -> None:
    fake_tools.hangs("lfs")
    tools = ToolQuotas(replace(DEFAULTS, quota_tool_wait_s=0.2, quota_tool_timeout_s=3.0))
    first = tools.read("lfs", "/mnt/lustre", {"user": 1000, "group": 100})
    assert first == {
        "quotas": [], "none": "`lfs quota` did not answer within 0.2 s", "pending": True,
    }  # fmt: skip
    pid = fake_tools.hung_pid("lfs")
    assert pid is not None
    for _ in range(5):  # none of these waits: the tool is still hanging after them
        assert tools.read("lfs", "/mnt/lustre", {"user": 1000, "group": 100}) == first
    os.kill(pid, 0)  # still alive: no read waited for it
    assert wait_until(lambda: tools.read("lfs", "/mnt/lustre", {"user": 1000, "group": 100})
                      != first, 10)  # fmt: skip
    later = tools.read("lfs", "/mnt/lustre", {"user": 1000, "group": 100})
    assert later["none"] == "`lfs quota` did not answer within 3 s"
    assert "pending" not in later  # the run is over: this one is the answer
    assert len(fake_tools.calls()) == 1  # killed, and the group was not asked of a dead server
    assert wait_until(lambda: not _alive(pid), 5)  # killed, not left behind


HELPER_TOLD_TO_LEAVE = """
import signal, sys, time
from trainwatch_lab.core.storage.quota_tools import ToolQuotas
from trainwatch_lab.core.worker.main import _terminate
signal.signal(signal.SIGTERM, _terminate)  # as the guard's helper
ToolQuotas().read("lfs", "/mnt/lustre", {"user": 1000})
print("reading", flush=True)
time.sleep(60)
"""


def test_a_hung_tool_goes_with_the_helper_that_ran_it(fake_tools: FakeTools) -> None:
    """The guard tells a helper stuck on a dead mount to leave (SIGTERM); the quota tool it
    started, hung on the same dead server, must not outlive it."""
    fake_tools.hangs("lfs")
    helper = subprocess.Popen(
        [sys.executable, "-c", HELPER_TOLD_TO_LEAVE], stdout=subprocess.PIPE, text=True
    )
    try:
        assert helper.stdout is not None and helper.stdout.readline() == "reading\n"
        assert wait_until(lambda: fake_tools.hung_pid("lfs") is not None, 10)
        pid = fake_tools.hung_pid("lfs")
        assert pid is not None and _alive(pid)
        helper.send_signal(signal.SIGTERM)
        assert helper.wait(10) == 128 + signal.SIGTERM
        assert wait_until(lambda: not _alive(pid), 5)  # gone with it
    finally:
        helper.kill()
        helper.wait()


def test_a_slow_tool_is_pending_then_answers(fake_tools: FakeTools) -> None:
    fake_tools.slow("lfs")
    fake_tools.prints("lfs", "-u", LFS_USER)
    tools = ToolQuotas(replace(DEFAULTS, quota_tool_wait_s=0.2, quota_tool_timeout_s=10.0))
    first = tools.read("lfs", "/mnt/lustre", {"user": 1000})
    assert first["quotas"] == [] and first["pending"] is True  # not yet, which is not "none"
    assert wait_until(lambda: tools.read("lfs", "/mnt/lustre", {"user": 1000})["quotas"], 10)
    later = tools.read("lfs", "/mnt/lustre", {"user": 1000})
    assert later["none"] is None and "pending" not in later


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie is gone for our purpose
        return f.read().rsplit(")", 1)[1].split()[0] != "Z"


# -- end to end: a tmpfs taken for Lustre, read by the live source ---------------------------
# The first look at a path goes through its mount's guard helper, another process: this
# sitecustomize (on the helper's PYTHONPATH) makes it take the tmpfs for Lustre too.
SITECUSTOMIZE = """import os
if os.environ.get("TRAINWATCH_TEST_LUSTRE_MAGIC"):
    from trainwatch_lab.core.storage import quota_tools
    quota_tools.TOOL_BY_MAGIC[int(os.environ["TRAINWATCH_TEST_LUSTRE_MAGIC"])] = "lfs"
"""


@pytest.fixture
def as_lustre(
    tmpfs_mount: Callable[..., object],
    fake_tools: FakeTools,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> tuple[Path, FakeTools]:
    """A tmpfs whose statfs type reads as Lustre's, here and in the guard's helpers, so the
    fake ``lfs`` answers for it."""
    mp = Path(tmpfs_mount("64m").path)  # type: ignore[attr-defined]
    magic = _take_for_lustre(mp, monkeypatch)
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    old = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, (str(site), old))))
    monkeypatch.setenv("TRAINWATCH_TEST_LUSTRE_MAGIC", str(magic))
    monkeypatch.setattr(quota_tools, "_shared", None)  # with the defaults, as the helpers
    return mp, fake_tools


def _samples(path: Path, n: int, owner: int | None = None) -> list[Sample]:
    src = PathsSource([str(path)], probe=False, owner=owner)
    try:
        return _ticks(src, n)
    finally:
        src.close()


def _ticks(
    src: PathsSource, n: int, until: Callable[[Sample], bool] | None = None, limit_s: float = 20
) -> list[Sample]:
    """``n`` ticks; with ``until``, ticks (a tenth of a second apart) until one passes it or
    ``limit_s`` is over, then ``n`` more."""
    out = []
    deadline = time.monotonic() + limit_s
    while until is not None and time.monotonic() < deadline:
        out.append(_tick(src))
        if until(out[-1]):
            break
        time.sleep(0.1)
    return out + [_tick(src) for _ in range(n)]


def _tick(src: PathsSource) -> Sample:
    s = Sample(t=time.time())
    src.collect(s)
    return s


def test_a_lustre_quota_feeds_the_space_rules_and_names_the_quota(as_lustre) -> None:
    mp, fakes = as_lustre
    # 30 MiB used of a 32 MiB limit: 2 MiB left, tighter than the 64 MiB filesystem
    row = lfs_row(str(mp), ("30720", " ", "0", "32768", "-"), ("12", " ", "0", "0", "-"))
    fakes.prints("lfs", "-u", row)
    samples = _samples(mp, 2)  # the first look through the guard's helper, then in place
    for s in samples:
        p = s.paths[str(mp)]
        assert p.quota is not None and p.quota["kind"] == "user"
        assert (p.total_bytes, p.avail_bytes) == (32 * MIB, 2 * MIB)
        assert p.quota["fs_total_bytes"] == 64 * MIB
        (alert,) = run(disk_almost_full, p)
        assert f"your quota on {mp}" in alert.message and "of 32 MiB" in alert.message
    assert all(c[2:4] == ["-q", "-u"] for c in fakes.calls()[::3])  # user, group, project


def test_a_hanging_lfs_is_said_once_and_never_holds_the_ticks(
    as_lustre, monkeypatch: pytest.MonkeyPatch
) -> None:
    mp, fakes = as_lustre
    fakes.hangs("lfs")
    timeout = 2.0  # ours, read in place after the first look; the helper's keeps the defaults
    monkeypatch.setattr(
        quota_tools, "_shared", ToolQuotas(replace(DEFAULTS, quota_tool_timeout_s=timeout))
    )
    src = PathsSource([str(mp)], probe=False)
    try:
        samples = _ticks(src, 4)
        pid = fakes.hung_pid("lfs")
        assert pid is not None and _alive(pid)  # four ticks done while it still hangs
        assert [s.notes.get("quota") for s in samples] == [None] * 4  # pending: not "none"
        samples += _ticks(src, 3, until=lambda s: "quota" in s.notes)
    finally:
        src.close()
    notes = [s.notes["quota"] for s in samples if "quota" in s.notes]
    assert notes == [f"no quota on {mp}: `lfs quota` did not answer within {timeout:g} s"]
    p = samples[-1].paths[str(mp)]
    assert p.responsive and p.quota is None  # the mount is fine; the tmpfs figures stand


def test_a_slow_lfs_is_read_on_a_later_tick_and_never_said_none(as_lustre) -> None:
    """The first answer of a tool slower than ``quota_tool_wait_s`` is pending: no note, no
    hold, so a later tick gets the quota (it used to be "no quota", not asked for 60 s)."""
    mp, fakes = as_lustre
    fakes.slow("lfs")
    row = lfs_row(str(mp), ("30720", " ", "0", "32768", "-"), ("12", " ", "0", "0", "-"))
    fakes.prints("lfs", "-u", row)
    src = PathsSource([str(mp)], probe=False)
    try:
        samples = _ticks(src, 1, until=lambda s: s.paths[str(mp)].quota is not None)
    finally:
        src.close()
    assert samples[0].paths[str(mp)].quota is None  # not yet
    assert samples[-1].paths[str(mp)].quota is not None
    assert samples[-1].paths[str(mp)].avail_bytes == 2 * MIB
    assert not [s.notes["quota"] for s in samples if "quota" in s.notes]


# -- whose quota: the watched process's filesystem ids, a set-group-ID directory's group ----
def test_process_ids_are_the_filesystem_ids(tmp_path: Path) -> None:
    status = tmp_path / "4321" / "status"
    status.parent.mkdir()
    status.write_text(
        "Name:\tpython\nUid:\t1000\t1000\t1000\t1001\nGid:\t100\t100\t100\t101\n"
        "Groups:\t4 24 27 100\n"
    )
    assert process_ids(4321, proc=str(tmp_path)) == (1001, 101)  # fsuid, fsgid
    with pytest.raises(OSError):
        process_ids(4322, proc=str(tmp_path))


def test_the_quota_read_is_the_watched_process_s(
    tmp_path: Path, fake_tools: FakeTools, monkeypatch: pytest.MonkeyPatch
) -> None:
    if os.geteuid() != 0 and os.environ.get("CI") != "true":
        pytest.skip("starting a process as nobody needs root")
    child = subprocess.Popen(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sleep", "30"]
    )
    try:
        assert wait_until(lambda: _exec_done(child.pid), 5)
        assert process_ids(child.pid) == (65534, 65534)
        _take_for_lustre(tmp_path, monkeypatch)
        read_quotas(str(tmp_path), pid=child.pid)
    finally:
        child.kill()
        child.wait()
    asked = {c[3]: c[4] for c in fake_tools.calls()}
    assert (asked["-u"], asked["-g"]) == ("65534", "65534")  # not root's
    monkeypatch.setattr(quota_tools, "_shared", ToolQuotas(QUICK))
    read_quotas(str(tmp_path), pid=child.pid)  # gone now: ours
    asked = {c[3]: c[4] for c in fake_tools.calls()[-3:]}
    assert (asked["-u"], asked["-g"]) == (str(os.geteuid()), str(os.getegid()))


def test_the_live_source_reads_the_quota_of_the_process_it_watches_for(as_lustre) -> None:
    """``watch --pid`` and the training processes found: the writer is that process, so its
    quota is the one read, in the guard's helper (first look) and in place (later ones)."""
    if os.geteuid() != 0 and os.environ.get("CI") != "true":
        pytest.skip("starting a process as nobody needs root")
    mp, fakes = as_lustre
    fakes.prints("lfs", "-u", lfs_row(str(mp), ("1024", " ", "0", "8192", "-"), ("1",) * 5))
    child = subprocess.Popen(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sleep", "30"]
    )
    try:
        assert wait_until(lambda: _exec_done(child.pid), 5)
        samples = _samples(mp, 2, owner=child.pid)
    finally:
        child.kill()
        child.wait()
    users = {c[4] for c in fakes.calls() if c[3] == "-u"}
    assert users == {"65534"}  # never root's quota
    assert samples[-1].paths[str(mp)].quota is not None


def test_a_writer_found_later_has_its_quota_read_at_once(as_lustre) -> None:
    """The server learns a path's writer after it watches the path (the user added it, then
    a training process was found writing there): ``add`` with the owner makes it the one
    whose quota is read, at the next tick, whatever "no quota" was held for ours."""
    if os.geteuid() != 0 and os.environ.get("CI") != "true":
        pytest.skip("starting a process as nobody needs root")
    mp, fakes = as_lustre  # no rows at all: no quota for anyone, held QUOTA_RECHECK_S
    child = subprocess.Popen(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sleep", "30"]
    )
    src = PathsSource([str(mp)], probe=False)
    try:
        assert wait_until(lambda: _exec_done(child.pid), 5)
        _ticks(src, 2)
        assert {c[4] for c in fakes.calls() if c[3] == "-u"} == {str(os.geteuid())}
        src.add(str(mp), owner=child.pid)
        assert src.owner_of(str(mp)) == child.pid
        _ticks(src, 1)
    finally:
        src.close()
        child.kill()
        child.wait()
    assert "65534" in {c[4] for c in fakes.calls() if c[3] == "-u"}


def _take_for_lustre(directory: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    """``directory``'s filesystem reads as Lustre's in this process, with fresh tool runs."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        magic = fs_magic(fd)
    finally:
        os.close(fd)
    assert magic is not None
    monkeypatch.setitem(quota_tools.TOOL_BY_MAGIC, magic, "lfs")
    monkeypatch.setattr(quota_tools, "_shared", ToolQuotas(QUICK))
    return magic


def _exec_done(pid: int) -> bool:
    with open(f"/proc/{pid}/comm") as f:
        return f.read().strip() == "sleep"  # setpriv has changed the ids and exec'd


@pytest.mark.parametrize("setgid", [False, True])
def test_the_group_charged_is_the_set_gid_directory_s(
    tmp_path: Path, fake_tools: FakeTools, monkeypatch: pytest.MonkeyPatch, setgid: bool
) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    os.chown(run_dir, -1, 4242)
    if setgid:
        run_dir.chmod(0o2775)
    _take_for_lustre(run_dir, monkeypatch)
    read_quotas(str(run_dir), uid=1234, gid=99)
    asked = {c[3]: c[4] for c in fake_tools.calls()}
    assert asked["-u"] == "1234"
    assert asked["-g"] == ("4242" if setgid else "99")
