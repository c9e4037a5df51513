"""``GET /api/resolvePath`` (JupyterLab asks it for each path-like word in an error or stderr
output) looks through the mount guard: a path on a hung share never freezes the server
(issue 34), and a healthy one still resolves as Jupyter resolves it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from trainwatch_lab.server.path_resolver import exists, server_candidate

# a share left paused this long is resumed by a watchdog, so that the old code, which froze the
# loop on it, fails the test instead of hanging it; far beyond the guard's 2 s timeout
WATCHDOG_S = 45.0


def body(response) -> dict:
    return json.loads(response.body)


@contextlib.asynccontextmanager
async def a_kernel(jp_fetch: Callable[..., Awaitable]) -> AsyncIterator[str]:
    """A real kernel of the test server (started on the server's own loop, as the UI does)."""
    reply = await jp_fetch("api", "kernels", method="POST", body=json.dumps({}))
    kid = body(reply)["id"]
    try:
        yield kid
    finally:
        await jp_fetch("api", "kernels", kid, method="DELETE")


@pytest.fixture
def share_in_root(jp_root_dir: Path, sshfs_mount) -> Path:
    """runs/ in the server's root is a symlink onto the share, as a logdir mirrored there."""
    runs = sshfs_mount.path / "runs"
    runs.mkdir(exist_ok=True)
    (runs / "events.out").write_text("x")
    (jp_root_dir / "runs").symlink_to(runs)
    return runs


async def resolve(jp_fetch, path: str, kernel: str | None = None) -> list[dict]:
    params = {"path": path} | ({"kernel": kernel} if kernel else {})
    return body(await jp_fetch("api", "resolvePath", params=params))["resolved"]


async def test_a_healthy_share_resolves_as_jupyter_resolves_it(
    jp_fetch, jp_root_dir, share_in_root
) -> None:
    assert await resolve(jp_fetch, "runs/events.out") == [
        {"scope": "server", "path": "runs/events.out"}
    ]
    absolute = str(share_in_root / "events.out")
    async with a_kernel(jp_fetch) as kid:
        found = await resolve(jp_fetch, absolute, kid)
        assert found == [{"scope": "kernel", "path": absolute}]
        assert await resolve(jp_fetch, "runs/missing.out", kid) == []
    bogus = await jp_fetch(
        "api", "resolvePath", params={"path": "here.txt", "kernel": "no-such-kernel"}
    )
    assert body(bogus)["unresolved"][0]["scope"] == "kernel"  # as Jupyter says it
    (jp_root_dir / "here.txt").write_text("local")
    assert await resolve(jp_fetch, "here.txt") == [{"scope": "server", "path": "here.txt"}]


@pytest.mark.parametrize("scope", ["server", "kernel"])
async def test_a_path_on_a_hung_share_never_freezes_the_server(
    jp_fetch, share_in_root, sshfs_mount, scope
) -> None:
    async with a_kernel(jp_fetch) as kid:
        # a name sshfs has never looked up, so no cached attribute answers for the share
        if scope == "server":
            await hung_share_lookup(jp_fetch, sshfs_mount, "runs/never-looked-up.out", None)
        else:
            path = str(share_in_root / "never-looked-up.out")
            await hung_share_lookup(jp_fetch, sshfs_mount, path, kid)


async def hung_share_lookup(jp_fetch, sshfs_mount, path: str, kernel: str | None) -> None:
    sshfs_mount.pause()
    resumed = threading.Event()

    def rescue() -> None:
        resumed.set()
        sshfs_mount.resume()

    watchdog = threading.Timer(WATCHDOG_S, rescue)
    watchdog.start()
    try:
        pending = asyncio.ensure_future(resolve(jp_fetch, path, kernel))
        await asyncio.sleep(0.3)  # the request is being served (the old code: frozen in it)
        status = await jp_fetch("api", "status")
        assert status.code == 200
        assert not resumed.is_set(), "the server answered only after the share came back"
        assert await pending == []  # the share did not answer: the word stays plain text
        assert not resumed.is_set()
    finally:
        watchdog.cancel()
        sshfs_mount.resume()


def test_server_candidates_stay_inside_the_root(tmp_path: Path) -> None:
    class Contents:  # the file contents manager's own path rules, as Jupyter has them
        root_dir = str(tmp_path)

        def _get_os_path(self, path: str) -> str:
            from jupyter_server.services.contents.filemanager import FileContentsManager

            return FileContentsManager(root_dir=str(tmp_path))._get_os_path(path)

    assert server_candidate(Contents(), "a/b.txt") == (str(tmp_path / "a" / "b.txt"), "a/b.txt")
    assert server_candidate(Contents(), "../outside.txt") is None
    assert server_candidate(Contents(), "~/elsewhere") is None


def test_exists_answers_for_local_files_without_a_helper(tmp_path: Path) -> None:
    from trainwatch_lab.core.guard.guard import MountGuard

    (tmp_path / "f").write_text("x")
    with MountGuard(2.0) as guard:
        assert exists(str(tmp_path / "f"), guard) == str((tmp_path / "f").resolve())
        assert exists(str(tmp_path / "nope"), guard) is None
        assert guard.live_pids() == []


def test_a_local_path_through_a_link_onto_a_hung_share_never_marks_its_disk_stuck(
    tmp_path: Path, sshfs_mount
) -> None:
    """A word in a traceback, ``/home/u/data/x`` with ``data`` a link onto a hung share: the
    helper for the link's own (local) mount timed out and that mount was marked stuck, so
    every guarded call on the local disk failed for as long as the helper lived."""
    from trainwatch_lab.core.guard.guard import MountGuard
    from trainwatch_lab.core.storage.mounts import mount_for_path, read_mounts

    (tmp_path / "data").symlink_to(sshfs_mount.path)
    local = mount_for_path(str(tmp_path), read_mounts()).mountpoint
    with MountGuard(1.0) as guard:
        sshfs_mount.pause()
        try:
            assert exists(str(tmp_path / "data" / "x"), guard) is None
            assert not guard.is_stuck(local)
            assert guard.call(local, "inspect", what="stat", path=str(tmp_path))["exists"]
        finally:
            sshfs_mount.resume()
