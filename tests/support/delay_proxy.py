"""A TCP forwarder that delays one direction: a network link with latency, for sshfs.

``python -m tests.support.delay_proxy LISTEN_PORT TARGET_PORT DELAY_MS`` listens on 127.0.0.1
and forwards every connection to 127.0.0.1:TARGET_PORT. Bytes from the client reach the
server ``DELAY_MS`` after they arrived, in order and without a throughput limit (each chunk
is queued with its due time), so every request/response round trip of the protocol on top
(an sftp write + fsync, say) costs at least that much: a share across a slow link, on one
machine. A separate process, so the test process's GIL never adds latency of its own.
"""

from __future__ import annotations

import contextlib
import queue
import socket
import sys
import threading
import time


def _pump_delayed(src: socket.socket, dst: socket.socket, delay_s: float) -> None:
    chunks: queue.Queue[tuple[float, bytes]] = queue.Queue()

    def send() -> None:
        while True:
            due, data = chunks.get()
            if not data:
                break
            time.sleep(max(0.0, due - time.monotonic()))
            try:
                dst.sendall(data)
            except OSError:
                break
        _close(dst)

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    while True:
        try:
            data = src.recv(65536)
        except OSError:
            data = b""
        chunks.put((time.monotonic() + delay_s, data))
        if not data:
            break


def _pump(src: socket.socket, dst: socket.socket) -> None:
    while True:
        try:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
        except OSError:
            break
    _close(dst)


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


def serve(listen_port: int, target_port: int, delay_s: float) -> None:
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", listen_port))
    server.listen(8)
    while True:
        client, _ = server.accept()
        upstream = socket.create_connection(("127.0.0.1", target_port))
        for sock in (client, upstream):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(
            target=_pump_delayed, args=(client, upstream, delay_s), daemon=True
        ).start()
        threading.Thread(target=_pump, args=(upstream, client), daemon=True).start()


if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]) / 1000.0)
