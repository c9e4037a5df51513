"""The exit status of a process we did not start, from the kernel's process connector.

Only a parent learns how its child ended (``waitpid``); a training script in a terminal,
tmux or nohup is nobody's child of ours. The kernel tells whoever asks (root, or
CAP_NET_ADMIN; recent kernels any user): a NETLINK_CONNECTOR socket subscribed to the
process connector (``PROC_CN_MCAST_LISTEN``) receives a ``PROC_EVENT_EXIT`` for every task
that exits, with its wait status. Layouts from linux/netlink.h (``nlmsghdr``),
linux/connector.h (``cn_msg``) and linux/cn_proc.h (``proc_event``, ``exit_proc_event``);
parsed here with ``struct``, nothing else.

The socket is read on a thread of its own (never a sampler tick, never an event loop) and
only while a process is watched: every exit on the machine wakes the thread, so nothing
listens while nothing trains. Exits are kept for watched pids only (bounded). Where the
kernel refuses (no CAP_NET_ADMIN on an older kernel: the subscription's ack carries EPERM;
a container's network namespace; a kernel without CONFIG_PROC_EVENTS) it says so once in
the debug log, and ends are recorded as before, without a status.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import select
import signal
import socket
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

NETLINK_CONNECTOR = 11
CN_IDX_PROC = 1
CN_VAL_PROC = 1
PROC_CN_MCAST_LISTEN = 1
PROC_CN_MCAST_IGNORE = 2
PROC_EVENT_NONE = 0  # the ack of a subscription, with its error
PROC_EVENT_EXIT = 0x80000000
NLMSG_DONE = 3

NLMSGHDR = struct.Struct("=IHHII")  # len, type, flags, seq, pid
CN_MSG = struct.Struct("=IIIIHH")  # cb_id.idx, cb_id.val, seq, ack, len, flags
PROC_EVENT = struct.Struct("=IIQ")  # what, cpu, timestamp_ns (CLOCK_MONOTONIC)
EXIT_EVENT = struct.Struct("=iiII")  # process_pid, process_tgid, exit_code, exit_signal
ACK_END = PROC_EVENT.size + 4  # event_data.ack.err

MAX_WATCHED = 4096  # pids watched at once (the discovery lists far fewer)
RECV_BYTES = 65536
WAKE_S = 0.5  # the thread looks whether it should stop this often
# every exit on the machine (every fork and exec too, before Linux 6.6's filter) is a
# message: read them in batches, at most this often (a wakeup a message cost ~60 us of CPU
# an exiting process, batches and the filter ~5 us: measured with /bin/true spawned 1000
# times); the socket's buffer holds a batch (~1,300 messages as the kernel counts them)
BATCH_S = 0.1
RCVBUF_BYTES = 1 << 20


def signal_name(number: int) -> str:
    """``SIGKILL``; ``signal 40`` for a real-time signal, which has no name of its own (the
    ``signal.Signals`` of those raises)."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


@dataclass(frozen=True, slots=True)
class Exit:
    """One process's end as the kernel reported it: ``status`` is a wait status."""

    pid: int
    status: int
    t: float  # Unix time of the exit

    def to_json(self) -> dict[str, Any]:
        """The shape ``trainwatch-lab run`` records: ``{"code": N}`` or a signal's name."""
        if os.WIFSIGNALED(self.status):
            name = signal_name(os.WTERMSIG(self.status))
            return {"code": None, "signal": name, "core": bool(self.status & 0x80)}
        return {"code": os.WEXITSTATUS(self.status)}


def filtering(release: str | None = None) -> bool:
    """Whether the kernel takes a subscription with an event filter (``struct proc_input``,
    Linux 6.6): then only exits are sent, not every fork and exec of the machine. An older
    kernel ignores such a message altogether, so it gets the plain one."""
    numbers = re.match(r"(\d+)\.(\d+)", release or os.uname().release)
    return numbers is not None and (int(numbers[1]), int(numbers[2])) >= (6, 6)


def listen_message(
    pid: int, op: int = PROC_CN_MCAST_LISTEN, ack: int = 0, only_exits: bool = False
) -> bytes:
    """The message that subscribes (or, with PROC_CN_MCAST_IGNORE, unsubscribes) a socket,
    with ``only_exits`` the filtered form (see ``filtering``); the kernel's answer to the
    plain form carries ``ack`` + 1 (its seq is the kernel's own), which names it ours."""
    body = struct.pack("=II", op, PROC_EVENT_EXIT) if only_exits else struct.pack("=I", op)
    cn = CN_MSG.pack(CN_IDX_PROC, CN_VAL_PROC, 0, ack, len(body), 0) + body
    return NLMSGHDR.pack(NLMSGHDR.size + len(cn), NLMSG_DONE, 0, 0, pid) + cn


def _align(n: int) -> int:
    return (n + 3) & ~3  # NLMSG_ALIGN


def _events(data: bytes) -> Iterator[tuple[int, int, bytes]]:
    """(seq, ack, proc_event body) of each message in one datagram (several may share it).
    A truncated or inconsistent message, or another connector's, is skipped: the
    kernel's word, never trusted for lengths."""
    at = 0
    while at + NLMSGHDR.size <= len(data):
        length = NLMSGHDR.unpack_from(data, at)[0]
        if length < NLMSGHDR.size or at + length > len(data):
            return  # a length that does not fit: the rest cannot be framed
        payload = data[at + NLMSGHDR.size : at + length]
        at += _align(length)
        if len(payload) < CN_MSG.size:
            continue
        idx, val, seq, ack, size, _flags = CN_MSG.unpack_from(payload)
        body = payload[CN_MSG.size : CN_MSG.size + size]
        if (idx, val) == (CN_IDX_PROC, CN_VAL_PROC) and len(body) == size >= PROC_EVENT.size:
            yield seq, ack, body


def refusal(data: bytes, ack: int) -> int | None:
    """The errno of the kernel's answer to our subscription (sent with ``ack``) when it
    refused it (an older kernel: EPERM without CAP_NET_ADMIN): an answer (PROC_EVENT_NONE,
    ack + 1) with ``err`` set. Answers go to every listener: another's refusal is not ours."""
    for _seq, got_ack, body in _events(data):
        if got_ack != (ack + 1) & 0xFFFFFFFF:
            continue
        if PROC_EVENT.unpack_from(body)[0] == PROC_EVENT_NONE and len(body) >= ACK_END:
            err = struct.unpack_from("=I", body, PROC_EVENT.size)[0]
            if err:
                return err
    return None


def parse(data: bytes, boot_offset: float) -> Iterator[Exit]:
    """The exits of thread-group leaders in one datagram. Anything else (other events, a
    thread's exit, a message that does not frame) is skipped. ``boot_offset``: Unix time
    minus CLOCK_MONOTONIC."""
    for _seq, _ack, body in _events(data):
        found = _exit_in(body, boot_offset)
        if found is not None:
            yield found


def _exit_in(body: bytes, boot_offset: float) -> Exit | None:
    """The exit in one proc_event, or None."""
    if len(body) < PROC_EVENT.size + EXIT_EVENT.size:
        return None
    what, _cpu, stamp = PROC_EVENT.unpack_from(body)
    if what != PROC_EVENT_EXIT:
        return None
    pid, tgid, status, _exit_signal = EXIT_EVENT.unpack_from(body, PROC_EVENT.size)
    if pid != tgid or pid <= 0:
        return None  # a thread ended, not the process
    return Exit(pid, status, boot_offset + stamp / 1e9)


def _boot_offset() -> float:
    return time.time() - time.monotonic()


class ProcExits:
    """Exit statuses of watched pids. ``watch(pid)`` when a process is first seen,
    ``take(pid)`` when it is gone (its Exit, or None when the kernel said nothing).
    The socket is open and its thread runs only while some pid is watched."""

    def __init__(self) -> None:
        self.available = True  # False once the kernel refused: never asked again
        self._lock = threading.Lock()
        self._wanted: set[int] = set()
        self._exits: dict[int, Exit] = {}
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._ack = 0  # our subscription's ack: the kernel's answer carries it + 1
        self._only_exits = filtering()

    @property
    def listening(self) -> bool:
        return self._sock is not None

    def watch(self, pid: int) -> None:
        """Keep ``pid``'s exit status from now on (opens the socket on first need)."""
        with self._lock:
            if not self.available or len(self._wanted) >= MAX_WATCHED:
                return
            self._wanted.add(pid)
            self._exits.pop(pid, None)  # an older process of that pid
            if self._sock is None:
                self._open()

    def take(self, pid: int) -> Exit | None:
        """``pid``'s exit, once it is gone (reads what the socket holds first, without
        waiting); stops watching it, and stops listening when nothing is watched."""
        with self._lock:
            self._pump()
            self._wanted.discard(pid)
            found = self._exits.pop(pid, None)
            if not self._wanted:
                self._close()
            return found

    def forget(self, pids: set[int] | list[int]) -> None:
        """Stop watching ``pids`` (their recorder closed); stop listening when nothing is."""
        with self._lock:
            self._wanted.difference_update(pids)
            for pid in pids:
                self._exits.pop(pid, None)
            if not self._wanted:
                self._close()

    def close(self) -> None:
        with self._lock:
            self._wanted.clear()
            self._exits.clear()
            self._close()

    # -- with the lock held ----------------------------------------------------------
    def _open(self) -> None:
        try:
            sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_CONNECTOR)
        except (OSError, AttributeError) as exc:  # no AF_NETLINK (not Linux), no connector
            self._refused(exc)
            return
        try:
            sock.bind((0, CN_IDX_PROC))  # port 0: the kernel picks one
            with contextlib.suppress(OSError):  # (capped by net.core.rmem_max)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF_BYTES)
            self._ack = int.from_bytes(os.urandom(4), "little")
            port = sock.getsockname()[0]
            sock.send(listen_message(port, ack=self._ack, only_exits=self._only_exits))
            sock.setblocking(False)
        except OSError as exc:
            sock.close()
            self._refused(exc)
            return
        self._sock = sock
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(sock, self._stop), name="trainwatch-proc-exits", daemon=True
        )
        self._thread.start()

    def _refused(self, exc: BaseException) -> None:
        self.available = False
        self._wanted.clear()
        log.debug(
            "trainwatch: no exit statuses from the process connector (%s); ends are "
            "recorded without one",
            exc,
        )

    def _close(self) -> None:
        sock, self._sock = self._sock, None
        self._stop.set()
        self._thread = None
        if sock is None:
            return
        with contextlib.suppress(OSError):  # the kernel counts listeners: tell it
            port = sock.getsockname()[0]
            sock.send(listen_message(port, PROC_CN_MCAST_IGNORE, only_exits=self._only_exits))
        sock.close()

    def _pump(self) -> None:
        """Read every datagram waiting on the socket, keeping the watched pids' exits."""
        sock = self._sock
        if sock is None:
            return
        offset = _boot_offset()
        while True:
            try:
                data = sock.recv(RECV_BYTES)
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno == errno.ENOBUFS:  # the kernel dropped some: read on
                    log.debug("trainwatch: process connector overrun; some exits were lost")
                    continue
                return
            err = refusal(data, self._ack)
            if err:  # subscribed, but the kernel said no: nothing will ever come
                self._refused(OSError(err, os.strerror(err)))
                self._close()
                return
            for found in parse(data, offset):
                if found.pid in self._wanted:
                    self._exits[found.pid] = found

    # -- the thread ------------------------------------------------------------------
    def _run(self, sock: socket.socket, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                ready, _, _ = select.select([sock], [], [], WAKE_S)
            except (OSError, ValueError):  # closed under us
                return
            if ready and not stop.is_set():
                with self._lock:
                    if self._sock is sock:
                        self._pump()
                stop.wait(BATCH_S)  # the next exits wait in the buffer: one wakeup each batch


_SHARED: ProcExits | None = None
_SHARED_LOCK = threading.Lock()


def shared() -> ProcExits:
    """The process's one listener (every recorder in a process shares it)."""
    global _SHARED
    with _SHARED_LOCK:
        if _SHARED is None:
            _SHARED = ProcExits()
        return _SHARED
