"""Real filesystems for tests, mounted as root and always cleaned up (loaded by tests/conftest.py).

Fixtures (each calls need_root()/need_tool(): skip on a laptop, FAIL under CI=true):

- ``tmpfs_mount``: factory ``tmpfs_mount(size="16m") -> Mounted``; a fresh tmpfs.
- ``loop_ext4``: factory ``loop_ext4(size_mb=32, reserved_pct=0) -> Mounted``; an ext4 image on
  a loop device (``.device`` is ``"loopN"``, ``.image`` the backing file).
- ``readonly_mount``: ``Mounted`` read-only tmpfs holding one file, ``existing.txt``.
- ``sshfs_mount``: ``SshfsMount``, a real network filesystem: a private sshd on 127.0.0.1
  (free port, generated host and client keys, external ``sftp-server`` so that the process
  serving the mount can be paused), mounted with sshfs. ``.mountpoint``, ``.path`` (a
  directory inside the mount), ``.remote`` (the directory it exports), ``.pause()`` /
  ``.resume()`` (SIGSTOP/SIGCONT the sftp-server: the mount stops answering, like a dead NFS
  server). Teardown resumes before unmounting, so no process stays stuck.

Helpers: ``guard_helpers()`` (live core.guard.guard helper processes of this test process, to
check that a dead mount piles nothing up), ``still_runs(pid)`` / ``thread_states(pid)`` (a
helper whose main thread exited while a lane's thread is stuck still runs),
``wait_until(predicate, timeout)``,
``is_mounted(path)``.

``Mounted`` and ``SshfsMount`` are ``os.PathLike`` (``os.fspath(m) == str(m.path)``).
Never touch a paused mount from the test process itself: a ``stat`` there hangs the test;
go through core.guard.guard (that is what it is for).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

from tests.support.env import need, need_root, need_tool

MOUNT_SOURCE = "trainwatch-test"  # the source column of our tmpfs mounts: easy to spot
SFTP_SERVER_CANDIDATES = (
    "/usr/lib/openssh/sftp-server",
    "/usr/libexec/openssh/sftp-server",
    "/usr/lib/ssh/sftp-server",
    "/usr/libexec/sftp-server",
    "/usr/lib/sftp-server",
)


def run(cmd: list[str], timeout: float = 30.0) -> str:
    """Run a setup command; on failure raise with its stderr (a fixture error says why)."""
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc.stdout


def is_mounted(path: str | os.PathLike[str]) -> bool:
    """From /proc/self/mountinfo only: never stats the (possibly dead) mount."""
    target = os.path.abspath(os.fspath(path)).replace(" ", "\\040")
    with open("/proc/self/mountinfo") as fh:
        return any(line.split(" ")[4] == target for line in fh)


def unmount(path: str | os.PathLike[str], fuse: bool = False) -> None:
    """Detach a mount even when it is busy or its server is gone (lazy unmount)."""
    cmds = [["umount", "-l", os.fspath(path)]]
    if fuse and shutil.which("fusermount3"):
        cmds.insert(0, ["fusermount3", "-u", "-z", os.fspath(path)])
    for cmd in cmds:
        if not is_mounted(path):
            return
        with contextlib.suppress(subprocess.TimeoutExpired, OSError):
            subprocess.run(cmd, capture_output=True, timeout=15)


def thread_states(pid: int) -> list[str]:
    """The state letter of each thread of ``pid`` (R, S, D, Z...), [] once it is reaped."""
    states = []
    with contextlib.suppress(OSError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{tid}/stat") as fh:
                states.append(fh.read().rsplit(")", 1)[1].split()[0])
    return states


def still_runs(pid: int) -> bool:
    """True while a thread of ``pid`` is not a zombie. A helper's lanes are threads: killed
    while one sleeps uninterruptibly on a dead mount, its main thread is a zombie (what
    psutil's status says) and the stuck thread keeps the process from exiting."""
    return any(state not in ("Z", "X") for state in thread_states(pid))


def guard_helpers() -> list[psutil.Process]:
    """The core.guard.guard helper processes of this test process that still run (stuck included):
    the way to check that a dead mount causes no pile-up of helpers."""
    return [
        child
        for child in psutil.Process().children(recursive=False)
        if "trainwatch_lab.core.worker.main" in _live_cmdline(child.pid)
    ]


def _live_cmdline(pid: int) -> str:
    """The command line as a live thread of ``pid`` reads it ("" once none runs): psutil
    asks the main thread, which may be a zombie while a stuck thread holds the process."""
    with contextlib.suppress(OSError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{tid}/cmdline", "rb") as fh:
                if cmd := fh.read():
                    return cmd.replace(b"\0", b" ").decode(errors="replace")
    return ""


def wait_until(predicate: Callable[[], object], timeout: float = 15.0) -> bool:
    """Poll ``predicate`` until true or ``timeout``; returns its last truth value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return bool(predicate())


@dataclass
class Mounted:
    mountpoint: Path
    fstype: str
    device: str | None = None  # "loopN" for loop_ext4
    image: Path | None = None

    @property
    def path(self) -> Path:
        return self.mountpoint

    def __fspath__(self) -> str:
        return str(self.path)


@dataclass
class SshfsMount:
    mountpoint: Path
    path: Path
    remote: Path
    port: int
    sshd_pid: int
    sftp_pid: int
    paused: bool = field(default=False)

    def pause(self) -> None:
        """SIGSTOP the sftp-server: every call on the mount now blocks until resume()."""
        os.kill(self.sftp_pid, signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.sftp_pid, signal.SIGCONT)
        self.paused = False

    def __fspath__(self) -> str:
        return str(self.path)


REPO = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def child_on_paused_share(
    mount: SshfsMount, script: str, *args: object, ready: str
) -> Iterator[subprocess.Popen[str]]:
    """``python -c script args`` from the repository; once it prints ``ready`` the share is
    paused and the child reads "go" on stdin; yields it. On the way out the share resumes
    first (a process stuck on it cannot die before), then a child still running is killed
    and what it printed is shown."""
    proc = subprocess.Popen(
        [sys.executable, "-c", script, *map(str, args)],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        assert proc.stdout.readline().strip() == ready
        mount.pause()
        proc.stdin.write("go\n")
        proc.stdin.flush()
        yield proc
    finally:
        mount.resume()
        if proc.poll() is None:
            proc.kill()
            out, err = proc.communicate()
            print("stdout:", out, "stderr:", err)


@pytest.fixture
def tmpfs_mount(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Mounted]]:
    need_root()
    need_tool("mount")
    made: list[Path] = []

    def make(size: str = "16m") -> Mounted:
        mp = tmp_path_factory.mktemp("tmpfs")
        run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", MOUNT_SOURCE, str(mp)])
        made.append(mp)
        return Mounted(mp, "tmpfs")

    yield make
    for mp in reversed(made):
        unmount(mp)


def _losetup(image: Path, attempts: int = 5) -> str:
    """Attach a free loop device; other tests may race us for the same one, so retry."""
    for i in range(attempts):
        try:
            return run(["losetup", "--find", "--show", str(image)]).strip()
        except RuntimeError:
            if i == attempts - 1:
                raise
            time.sleep(0.5)
    raise AssertionError("unreachable")


@pytest.fixture
def loop_ext4(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Mounted]]:
    need_root()
    for tool in ("losetup", "mkfs.ext4", "mount"):
        need_tool(tool)
    need(os.path.exists("/dev/loop-control"), "needs /dev/loop-control (loop devices)")
    made: list[tuple[Path, str]] = []

    def make(
        size_mb: int = 32,
        reserved_pct: int = 0,
        mkfs_args: tuple[str, ...] = (),
        options: str | None = None,
    ) -> Mounted:
        base = tmp_path_factory.mktemp("loop")
        image, mp = base / "disk.img", base / "mnt"
        mp.mkdir()
        with open(image, "wb") as fh:
            fh.truncate(size_mb * 1024 * 1024)
        mkfs = ["mkfs.ext4", "-q", "-F", "-m", str(reserved_pct), "-E", "nodiscard", *mkfs_args]
        run([*mkfs, str(image)])
        dev = _losetup(image)
        try:
            run(["mount", *(["-o", options] if options else []), dev, str(mp)])
        except Exception:
            subprocess.run(["losetup", "-d", dev], capture_output=True, timeout=15)
            raise
        made.append((mp, dev))
        return Mounted(mp, "ext4", device=os.path.basename(dev), image=image)

    yield make
    for mp, dev in reversed(made):
        unmount(mp)
        with contextlib.suppress(subprocess.TimeoutExpired, OSError):
            subprocess.run(["losetup", "-d", dev], capture_output=True, timeout=15)


@pytest.fixture
def readonly_mount(tmpfs_mount: Callable[..., Mounted]) -> Mounted:
    m = tmpfs_mount("4m")
    (m.mountpoint / "existing.txt").write_text("written before the remount\n")
    run(["mount", "-o", "remount,ro", str(m.mountpoint)])
    return m


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"sshd exited with status {proc.returncode}")
        with socket.socket() as s:
            s.settimeout(0.5)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"sshd did not listen on 127.0.0.1:{port} within {timeout} s")


def _sftp_server_of(sshd_pid: int, timeout: float = 10.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(psutil.Error):
            for child in psutil.Process(sshd_pid).children(recursive=True):
                with contextlib.suppress(psutil.Error):
                    if child.name() == "sftp-server":
                        return child.pid
        time.sleep(0.05)
    raise RuntimeError("no sftp-server process appeared under our sshd")


def _kill_tree(pid: int) -> None:
    with contextlib.suppress(psutil.Error):
        parent = psutil.Process(pid)
        procs = [*parent.children(recursive=True), parent]
        for p in procs:
            with contextlib.suppress(psutil.Error):
                p.send_signal(signal.SIGCONT)
                p.kill()
        psutil.wait_procs(procs, timeout=5)


def _sshfs_daemons(mountpoint: Path) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter(["name", "cmdline"]):
        with contextlib.suppress(psutil.Error):
            if p.info["name"] == "sshfs" and str(mountpoint) in (p.info["cmdline"] or []):
                found.append(p)
    return found


WATCHDOG = r"""
import os, signal, subprocess, sys, time
owner, sftp, sshd, mountpoint = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
while True:
    try:
        os.kill(owner, 0)
    except ProcessLookupError:
        break
    time.sleep(0.5)
for pid, sig in ((sftp, signal.SIGCONT), (sshd, signal.SIGKILL)):
    try:
        os.kill(pid, sig)
    except OSError:
        pass
subprocess.run(["fusermount3", "-u", "-z", mountpoint], capture_output=True, timeout=30)
"""


def _start_watchdog(sftp_pid: int, sshd_pid: int, mountpoint: Path) -> subprocess.Popen[bytes]:
    """If the test process dies without its teardown (killed by a timeout), resume the paused
    server and detach the mount anyway: otherwise processes stay stuck on it forever."""
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            WATCHDOG,
            str(os.getpid()),
            str(sftp_pid),
            str(sshd_pid),
            str(mountpoint),
        ],
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


@contextlib.contextmanager
def _sshfs(tmp_path_factory: pytest.TempPathFactory, delay_ms: float = 0.0) -> Iterator[SshfsMount]:
    need_root()
    sshfs = need_tool("sshfs")
    sshd = need_tool("sshd")
    keygen = need_tool("ssh-keygen")
    need_tool("fusermount3")
    need(os.path.exists("/dev/fuse"), "needs /dev/fuse")
    sftp = next((p for p in SFTP_SERVER_CANDIDATES if os.access(p, os.X_OK)), None)
    need(sftp is not None, "needs the OpenSSH sftp-server binary")

    base = tmp_path_factory.mktemp("sshfs")
    keys, remote, mp = base / "keys", base / "remote", base / "mnt"
    for d in (keys, remote, mp):
        d.mkdir()
    (remote / "work").mkdir()
    host_key, client_key = keys / "host_ed25519", keys / "client_ed25519"
    for key in (host_key, client_key):
        run([keygen, "-q", "-t", "ed25519", "-N", "", "-f", str(key)])
    authorized = keys / "authorized_keys"
    shutil.copy(f"{client_key}.pub", authorized)
    authorized.chmod(0o600)
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # Debian sshd's privilege-separation dir
    user = pwd.getpwuid(os.geteuid()).pw_name
    port = _free_port()
    config = keys / "sshd_config"
    config.write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {host_key}\nPidFile none\n"
        f"AuthorizedKeysFile {authorized}\nPermitRootLogin prohibit-password\n"
        "PubkeyAuthentication yes\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        f"UsePAM no\nStrictModes no\nAllowUsers {user}\nLogLevel ERROR\n"
        f"Subsystem sftp {sftp}\n"
    )
    log = open(keys / "sshd.log", "wb")  # noqa: SIM115 - closed in teardown
    daemon = subprocess.Popen(
        [sshd, "-D", "-e", "-f", str(config)], stdout=log, stderr=log, start_new_session=True
    )
    mount: SshfsMount | None = None
    watchdog: subprocess.Popen[bytes] | None = None
    proxy: subprocess.Popen[bytes] | None = None
    try:
        _wait_for_port(port, daemon)
        connect = port
        if delay_ms:
            connect = _free_port()
            proxy = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tests.support.delay_proxy",
                    str(connect),
                    str(port),
                    str(delay_ms),
                ],
                cwd=Path(__file__).resolve().parents[2],
                start_new_session=True,
            )
            _wait_for_port(connect, proxy)
        options = (
            f"IdentityFile={client_key},IdentitiesOnly=yes,StrictHostKeyChecking=no,"
            f"UserKnownHostsFile=/dev/null,BatchMode=yes,port={connect},LogLevel=ERROR"
        )
        run([sshfs, f"{user}@127.0.0.1:{remote}", str(mp), "-o", options], timeout=30)
        mount = SshfsMount(
            mountpoint=mp,
            path=mp / "work",
            remote=remote,
            port=port,
            sshd_pid=daemon.pid,
            sftp_pid=_sftp_server_of(daemon.pid),
        )
        watchdog = _start_watchdog(mount.sftp_pid, daemon.pid, mp)
        yield mount
    finally:
        if watchdog is not None:
            watchdog.kill()
            watchdog.wait()
        if mount is not None:
            mount.resume()  # a paused server would keep the unmount and stuck callers waiting
        unmount(mp, fuse=True)
        for p in _sshfs_daemons(mp):
            with contextlib.suppress(psutil.Error):
                p.kill()
        _kill_tree(daemon.pid)
        with contextlib.suppress(subprocess.TimeoutExpired):
            daemon.wait(timeout=5)
        if proxy is not None:
            proxy.kill()
            proxy.wait()
        log.close()


@pytest.fixture
def sshfs_mount(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshfsMount]:
    with _sshfs(tmp_path_factory) as mount:
        yield mount


@pytest.fixture
def slow_sshfs_mount(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshfsMount]:
    """``sshfs_mount`` across a link that adds 25 ms to every request: a share that is slow,
    not dead (see delay_proxy.py)."""
    with _sshfs(tmp_path_factory, delay_ms=25.0) as mount:
        yield mount
