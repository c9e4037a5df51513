"""A stream client that stops reading costs the server one message, not a queue of every
sample since (issue 34: 100 such sockets took a server from 441 to 916 MiB), gets the latest
sample when it reads again, and is closed when it stays silent too long. A real server and
a raw TCP client that does the WebSocket handshake and then stops reading; both sockets'
buffers made small so that "the network is full" is reached with a few messages."""

from __future__ import annotations

import asyncio
import gc
import json
import socket
import threading
import weakref
from types import SimpleNamespace
from typing import Any

from trainwatch_lab.server.handlers import StreamHandler

MESSAGE = 64 * 1024
PUSHED = 200  # 12.5 MiB in all: what the old server queued for a client that did not read


async def raw_client(port: int, base_url: str, auth: dict[str, str]) -> tuple[Any, Any]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    reader, writer = await asyncio.open_connection(sock=sock, limit=4096)
    path = f"{base_url.rstrip('/')}/trainwatch-lab/api/stream"
    headers = [
        f"GET {path} HTTP/1.1",
        f"Host: 127.0.0.1:{port}",
        "Upgrade: websocket",
        "Connection: Upgrade",
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
        "Sec-WebSocket-Version: 13",
        *(f"{k}: {v}" for k, v in auth.items()),
    ]
    writer.write(("\r\n".join(headers) + "\r\n\r\n").encode())
    await writer.drain()
    reply = await reader.readuntil(b"\r\n\r\n")
    assert reply.startswith(b"HTTP/1.1 101"), reply
    return reader, writer


async def frames(reader: Any) -> Any:
    """Text frames as the server sends them (unmasked), one payload at a time."""
    while True:
        head = await reader.readexactly(2)
        size = head[1] & 0x7F
        if size == 126:
            size = int.from_bytes(await reader.readexactly(2), "big")
        elif size == 127:
            size = int.from_bytes(await reader.readexactly(8), "big")
        yield head[0] & 0x0F, await reader.readexactly(size)


async def stream_handler(hub: Any) -> StreamHandler:
    while True:
        with hub._lock:
            found = [
                listener.__self__
                for listener in hub._listeners
                if isinstance(getattr(listener, "__self__", None), StreamHandler)
            ]
        if found:
            handler = found[0]
            handler._unlisten()  # only the samples this test hands over, none of the hub's
            handler._unlisten = None
            handler.ws_connection.stream.socket.setsockopt(
                socket.SOL_SOCKET, socket.SO_SNDBUF, 4096
            )
            return handler
        await asyncio.sleep(0.05)


def push(handler: StreamHandler, count: int, first: int = 0) -> None:
    """Samples as the sampler thread hands them over, each one distinct and MESSAGE long."""

    def run() -> None:
        for i in range(first, first + count):
            text = json.dumps({"t": float(i), "pad": "x" * MESSAGE})
            handler._on_sample(SimpleNamespace(t=float(i)), text)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()


async def settle() -> None:
    for _ in range(20):  # the loop runs every call_soon_threadsafe callback queued so far
        await asyncio.sleep(0.01)


async def test_a_client_that_stops_reading_costs_one_message_and_gets_the_latest(
    jp_fetch, jp_serverapp, jp_base_url, jp_auth_header, hub
) -> None:
    reader, writer = await raw_client(jp_serverapp.port, jp_base_url, jp_auth_header)
    try:
        handler = await stream_handler(hub)
        push(handler, PUSHED)
        await settle()
        queued = len(handler.ws_connection.stream._write_buffer)
        assert queued <= 3 * MESSAGE, f"{queued} bytes queued for a client that does not read"
        seen: list[float] = []
        async for opcode, payload in frames(reader):
            assert opcode == 1
            data = json.loads(payload)
            if "pad" in data:
                seen.append(data["t"])
            if seen and seen[-1] == PUSHED - 1:
                break
        assert len(seen) < PUSHED // 4, "it got the queue of every sample, not the latest"
        assert seen == sorted(seen)
    finally:
        writer.close()


async def test_a_client_silent_too_long_is_closed(
    jp_fetch, jp_serverapp, jp_base_url, jp_auth_header, hub
) -> None:
    _reader, writer = await raw_client(jp_serverapp.port, jp_base_url, jp_auth_header)
    try:
        handler = await stream_handler(hub)
        handler.stalled_close_s = 0.2
        push(handler, 50)
        await settle()
        assert not handler.ws_connection.is_closing()  # a stall begins; not yet too long
        await asyncio.sleep(0.5)  # past the limit (only longer on a loaded machine)
        push(handler, 1, first=50)
        await settle()
        assert handler.ws_connection is None or handler.ws_connection.is_closing()
        while handler._acquired:  # on_close runs once tornado gives up on the close frame
            await asyncio.sleep(0.1)
    finally:
        writer.close()


def stream_handlers(hub: Any) -> list[StreamHandler]:
    with hub._lock:
        return [
            listener.__self__
            for listener in hub._listeners
            if isinstance(getattr(listener, "__self__", None), StreamHandler)
        ]


async def test_silent_clients_that_close_leave_nothing_behind(
    jp_fetch, jp_serverapp, jp_base_url, jp_auth_header, hub
) -> None:
    """After 100 silent sockets closed, the server stayed at 529 MiB (issue 34 item 5): once
    a client is gone, no listener, lease or handler of it may stay (its queue goes with it)."""
    clients = [await raw_client(jp_serverapp.port, jp_base_url, jp_auth_header) for _ in range(20)]
    for _ in range(1200):
        if len(stream_handlers(hub)) == len(clients):
            break
        await asyncio.sleep(0.05)
    handlers = stream_handlers(hub)
    for handler in handlers:  # their network is full: each holds a message in flight
        handler.ws_connection.stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    for handler in handlers:
        push(handler, 5)
    await settle()
    gone = [weakref.ref(h) for h in handlers]
    del handler, handlers
    for _reader, writer in clients:
        writer.transport.abort()  # the client goes away without a close frame
    for _ in range(1200):  # tornado sees each socket end, then on_close runs (60 s margin)
        if not stream_handlers(hub):
            break
        await asyncio.sleep(0.05)
    assert stream_handlers(hub) == [], "a closed client's handler still listens"
    for _ in range(100):
        gc.collect()
        if not [ref for ref in gone if ref() is not None]:
            break
        await asyncio.sleep(0.05)
    assert [ref() for ref in gone if ref() is not None] == []
