"""server.attach and core.attach.link: a process of the server's user attaches to the one
sampler over the real abstract socket; strangers, junk and a peer that never reads change
nothing (issue 33)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.support.env import need_root
from tests.support.kernel_client import kernel_says
from trainwatch_lab.core.attach.link import HubLink
from trainwatch_lab.core.attach.wire import ENV, address
from trainwatch_lab.server.attach import MAX_PENDING

ROOT = Path(__file__).resolve().parents[2]


async def until(predicate, timeout: float = 30.0) -> bool:
    """Poll ``predicate`` while the server's loop runs (a generous margin, never a bound)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        await asyncio.sleep(0.05)
    return bool(predicate())


async def attach_server(hub):
    assert await until(lambda: hub.attach is not None), "the extension opened no socket"
    return hub.attach


async def test_the_socket_is_named_in_the_environment_kernels_inherit(hub) -> None:
    server = await attach_server(hub)
    assert os.environ[ENV] == server.name and server.name.startswith("@trainwatch-")
    hub.close_now()
    assert ENV not in os.environ  # kernels started from now on sample by themselves


async def test_a_process_of_our_user_attaches_and_reads_the_one_sample(hub, tmp_path) -> None:
    server = await attach_server(hub)
    link = await asyncio.to_thread(HubLink, server.name)
    try:
        assert link.server_pid == os.getpid() and link.interval == hub.config.interval
        logdir = str(tmp_path / "runs")
        link.watch("dashboard", [logdir])
        role = f"attached:{os.getpid()}"  # (not a kernel of this server)
        assert await until(lambda: role in hub.roles().get(logdir, []))
        assert hub.running  # an attached process holds the lease like a panel
        assert await until(lambda: link.latest is not None and logdir in link.latest.paths)
        # the panel's sample: the same warnings and headline as every other view
        assert await until(lambda: hub.latest is not None and link.latest.t == hub.latest.t)
        assert [w.key for w in link.latest.warnings] == [w.key for w in hub.latest.warnings]
        assert link.latest.headline == hub.latest.headline
        fresh = await asyncio.to_thread(link.fresh, time.time(), 30)
        assert fresh is not None
    finally:
        link.close()
    assert await until(lambda: logdir not in hub.watched())  # gone with its process


async def test_junk_gets_one_line_and_changes_nothing(hub, tmp_path) -> None:
    server = await attach_server(hub)
    before = hub.roles()
    reader, writer = await asyncio.open_unix_connection(address(server.name))
    try:
        assert "hello" in json.loads(await reader.readline())
        bad = [
            b"not json",
            b'{"paths": "/tmp"}',
            b'{"paths": ["relative/path"]}',
            json.dumps({"paths": ["/x"] * 65}).encode(),
            b'{"tick": 1}',
            b'{"paths": [], "tick": true}',
            b"[]",
            b'{"check": {"paths": []}}',
            b'{"check": {"paths": ["/tmp"], "probe": "yes"}}',
            b'{"check": {"paths": ["/tmp"], "timeout": 1e9}}',
            b'{"check": {"paths": ["/tmp"], "colour": "red"}}',
            b'{"check": ["/tmp"]}',
        ]
        for line in bad:
            writer.write(line + b"\n")
            await writer.drain()
            while True:  # samples may come first
                answer = json.loads(await asyncio.wait_for(reader.readline(), 30))
                if "error" in answer:
                    break
            assert answer["error"] and "\n" not in answer["error"]
        assert hub.roles() == before
        writer.write(b"x" * (80 * 1024) + b"\n")  # over the line limit: hung up on
        await writer.drain()
        assert await asyncio.wait_for(_read_to_end(reader), 30)
    finally:
        writer.close()


async def _read_to_end(reader: asyncio.StreamReader) -> bool:
    while await reader.read(65536):
        pass
    return True


async def test_a_peer_that_never_reads_costs_a_bounded_buffer(hub, tmp_path) -> None:
    server = await attach_server(hub)
    for i in range(60):  # samples of tens of KiB: the socket's buffers fill within seconds
        hub.add_user_path(str(tmp_path / f"dir-{i:02d}"))
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    try:
        await asyncio.get_running_loop().sock_connect(sock, address(server.name))
        assert await until(lambda: len(server.kernels) == 1)
        (peer,) = server.kernels.values()
        # once its buffers are full, the samples it did not read are skipped, not queued
        assert await until(lambda: peer.skipped > 0, 120)
        assert peer.pending <= MAX_PENDING
    finally:
        sock.close()


async def test_another_user_is_refused_before_a_word(hub) -> None:
    need_root("needs root to connect as another user")
    server = await attach_server(hub)
    script = textwrap.dedent(
        f"""
        import os, socket
        os.setgid(65534); os.setuid(65534)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(20)
        s.connect({address(server.name)!r})
        print(repr(s.recv(65536)))
        """
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", script, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err
    assert out.decode().strip() == "b''"  # hung up on: no hello, no sample
    assert server.kernels == {}


@pytest.mark.parametrize("name", ["@trainwatch-0-nobody-listens"])
def test_no_server_is_a_clear_error_at_once(name: str) -> None:
    from trainwatch_lab.core.attach.link import LinkError

    with pytest.raises(LinkError):
        HubLink(name)


async def test_past_the_cap_a_kernel_is_told_and_samples_by_itself(hub, monkeypatch) -> None:
    from trainwatch_lab.core.attach.link import LinkError
    from trainwatch_lab.server import attach

    server = await attach_server(hub)
    monkeypatch.setattr(attach, "MAX_ATTACHED", 1)
    first = await asyncio.to_thread(HubLink, server.name)
    try:
        with pytest.raises(LinkError, match="hello"):
            await asyncio.to_thread(HubLink, server.name)
        assert len(server.kernels) == 1
    finally:
        first.close()


async def test_the_last_dashboard_to_close_hangs_up_and_lets_the_sampler_stop(hub, tmp_path):
    """An attached kernel holds the server's sampler running: once its dashboards are closed
    it must not (the link is shared by the kernel's dashboards and goes with the last)."""
    from trainwatch_lab.core.attach.source import HubSource

    server = await attach_server(hub)
    link = await asyncio.to_thread(HubLink, server.name)
    first, second = HubSource(link, [str(tmp_path / "a")]), HubSource(link, [str(tmp_path / "b")])
    role = f"attached:{os.getpid()}"
    assert await until(lambda: role in hub.roles().get(str(tmp_path / "b"), []))
    second.close()
    assert await until(lambda: str(tmp_path / "b") not in hub.watched())
    assert str(tmp_path / "a") in hub.watched() and not link.closed
    first.close()
    assert link.closed
    assert await until(lambda: server.kernels == {} and str(tmp_path / "a") not in hub.watched())
    assert await until(lambda: not hub.running, 60)  # its grace over, the sampler stops


async def test_a_kernel_that_comes_back_keeps_its_new_connection(hub, tmp_path) -> None:
    """Connections are told apart by themselves, not by pid: the old one's end (a cell's own
    sampler hanging up) must not take the new one's samples or paths with it."""
    server = await attach_server(hub)
    old = await asyncio.to_thread(HubLink, server.name)
    new = await asyncio.to_thread(HubLink, server.name)
    assert await until(lambda: len(server.kernels) == 2)
    new.watch("dashboard", [str(tmp_path / "new")])
    old.close()
    assert await until(lambda: len(server.kernels) == 1)
    assert await until(lambda: str(tmp_path / "new") in hub.watched())
    seen = new.latest.t if new.latest is not None else 0.0
    assert await until(lambda: new.latest is not None and new.latest.t > seen)
    new.close()


def test_a_server_that_speaks_another_protocol_is_not_attached_to() -> None:
    import threading

    from trainwatch_lab.core.attach.link import LinkError

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    name = f"@trainwatch-test-{os.getpid()}-protocol"
    listener.bind(address(name))
    listener.listen(1)

    def serve() -> None:
        conn, _ = listener.accept()
        conn.sendall(b'{"hello": {"protocol": 99, "interval": 1}}\n')
        conn.recv(1)
        conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        with pytest.raises(LinkError, match="protocol 99"):
            HubLink(name)
    finally:
        listener.close()


async def test_when_the_server_goes_the_kernel_says_so_and_shows_nothing_stale(hub, tmp_path):
    from trainwatch_lab.core.attach.source import GONE_NOTE, HubSource
    from trainwatch_lab.core.model import Sample

    server = await attach_server(hub)
    link = await asyncio.to_thread(HubLink, server.name)
    source = HubSource(link, [str(tmp_path)])
    assert await until(lambda: link.latest is not None and str(tmp_path) in link.latest.paths)
    sample = Sample(t=time.time())
    source.collect(sample)
    assert str(tmp_path) in sample.paths and "paths" not in sample.notes
    server.close()  # the server goes (its sockets with it)
    assert await until(lambda: link.closed)
    sample = Sample(t=time.time())
    source.collect(sample)
    assert sample.paths == {} and sample.notes["paths"] == GONE_NOTE
    source.close()


async def test_a_notebooks_kernel_hears_how_many_browsers_are_connected(
    jp_serverapp, jp_ws_fetch, hub, tmp_path
) -> None:
    """A dashboard drawing for a closed browser tab costs its kernel the charts and this
    server the messages, which jupyter_server keeps for a reconnect with no bound: a kernel
    of this server is told how many WebSockets are open to it, 0 when the tab closed."""
    server = await attach_server(hub)
    km = jp_serverapp.kernel_manager
    kid = await km.start_kernel(env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        said = await asyncio.to_thread(
            kernel_says,
            km.get_kernel(kid).connection_file,
            "from trainwatch_lab.core.attach.link import shared_link\n"
            f"link = shared_link(); link.watch('dashboard', [{str(tmp_path)!r}])\n"
            "print(link is not None)",
        )
        assert said == "True", said

        def told() -> int | None:
            mine = [k for k in server.kernels.values() if k.role == f"notebook:{kid}"]
            return mine[0].clients if mine else None

        async def kernel_heard() -> str:
            connection_file = km.get_kernel(kid).connection_file
            return await asyncio.to_thread(kernel_says, connection_file, "print(link.clients)")

        assert await until(lambda: told() == 0)  # no browser yet (ZMQ clients are none)
        assert await kernel_heard() == "0"
        ws = await jp_ws_fetch("api", "kernels", kid, "channels")
        assert await until(lambda: told() == 1)
        assert await kernel_heard() == "1"
        ws.close()
        assert await until(lambda: told() == 0)
        assert await kernel_heard() == "0"
    finally:
        await km.shutdown_kernel(kid, now=True)
