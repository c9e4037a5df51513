"""Word when you are away: a webhook hears when a warning starts and when it clears.

An overnight run dies while nobody looks at the notebook; a chat message gets someone there.
The Notifier subscribes to a Sampler. On the sampler thread it only compares the warnings
with what the webhook was last told and puts a message on a bounded queue (never blocking);
its own daemon thread POSTs them with the standard library, retrying with backoff. A webhook
that hangs or fails therefore costs its thread, never a sample.

At most one message per warning (code and subject) per ``notify_repeat_s`` (10 min): a
warning that clears soon after it was announced is reported cleared once that time is up,
unless it came back meanwhile (then the webhook's picture is right already).

Formats: ``json`` (the warning object plus state, host and time), ``slack`` (incoming
webhook ``{"text"}``), ``dingtalk`` and ``wecom`` (``{"msgtype": "text", "text":
{"content"}}``), ``feishu`` (``{"msg_type": "text", "content": {"text"}}``). The robots
answer HTTP 200 with an error code in the body; a non-zero code counts as a failure.
A DingTalk or Feishu robot with signing on gets its secret as the URL's fragment,
``...#secret=SEC...`` (advice.notify_sign). A URL with ``user:pass@`` (a webhook behind
basic auth) sends them, percent-decoded, as an ``Authorization: Basic`` header: urllib would
take the userinfo for part of the host name.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import queue
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from ..core.defaults import DEFAULTS, Defaults
from ..core.model import Alert, Sample
from ..core.redact import redact
from .notify_sign import check_signing, signed, split_secret

log = logging.getLogger(__name__)

FORMATS = ("json", "slack", "dingtalk", "feishu", "wecom")
NOTIFY_SEVERITIES = ("warning", "critical")
WECOM_MAX_BYTES = 2048  # the WeCom robot refuses a longer text.content


def check_target(url: str, fmt: str = "json") -> tuple[str, str]:
    """``(url, format)`` cleaned, or ValueError with the one line a surface shows."""
    text = (url or "").strip()
    parts = urlsplit(text)
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ValueError(f"--notify takes an http:// or https:// webhook URL, got {redact(text)!r}")
    if any(c.isspace() or not c.isprintable() for c in text):
        # nothing past the space: the rest of a token split in two would not look like one
        start = redact(text.split(None, 1)[0] if text.split() else "")
        raise ValueError(
            f"--notify: the webhook URL holds a space or a control character: {start!r}..."
        )
    name = (fmt or "").strip().lower()
    if name not in FORMATS:
        raise ValueError(f"--notify-format must be one of {', '.join(FORMATS)}; got {fmt!r}")
    split_secret(text)  # a malformed #secret= is refused here, where the URL is given
    return text, name


def split_userinfo(url: str) -> tuple[str, str | None]:
    """``(url without user:pass@, the Basic Authorization header or None)``."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, _, hostport = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    token = f"{unquote(user)}:{unquote(password)}".encode()
    header = "Basic " + base64.b64encode(token).decode("ascii")
    return urlunsplit(parts._replace(netloc=hostport)), header


@dataclass(frozen=True, slots=True)
class Message:
    """One notification: a warning that ``state`` = started or cleared at ``t`` (epoch)."""

    state: str
    alert: Alert
    t: float
    host: str


def _stamp(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="seconds")


def text_of(msg: Message) -> str:
    """The chat line: says the host, the warning, and the fix (a message read on a phone)."""
    a = msg.alert
    if msg.state == "cleared":
        return (
            f"[trainwatch] cleared on {msg.host} at {_stamp(msg.t)}: {a.code} {a.subject} "
            f"(was: {a.message})"
        )
    return (
        f"[trainwatch] {a.severity.upper()} on {msg.host} at {_stamp(msg.t)}: {a.code} "
        f"{a.subject}\n{a.message}\nFix: {a.fix}"
    )


def body_of(msg: Message, fmt: str) -> dict[str, Any]:
    """The POST body in the target's documented format."""
    if fmt == "json":
        return {**msg.alert.to_json(), "state": msg.state, "host": msg.host, "time": msg.t}
    text = text_of(msg)
    if fmt == "slack":
        return {"text": text}
    if fmt == "feishu":
        return {"msg_type": "text", "content": {"text": text}}
    if fmt == "wecom":
        raw = text.encode()
        if len(raw) > WECOM_MAX_BYTES:
            text = raw[: WECOM_MAX_BYTES - 3].decode(errors="ignore") + "..."
    return {"msgtype": "text", "text": {"content": text}}  # dingtalk, wecom


class _Refused(Exception):
    """The target answered and will answer the same again: no retry."""


def _robot_error(fmt: str, raw: bytes) -> str | None:
    """The error a robot put in an HTTP 200 body, or None."""
    if fmt in ("json", "slack"):
        return None
    try:
        reply = json.loads(raw or b"{}")
    except ValueError:
        return None
    if not isinstance(reply, dict):
        return None
    code = reply.get("errcode", reply.get("code", reply.get("StatusCode", 0)))
    if code in (0, None):
        return None
    return f"{fmt} answered code {code}: {reply.get('errmsg') or reply.get('msg') or ''}".strip()


@dataclass(slots=True)
class _Told:
    active: bool  # what the webhook was last told
    at: float  # when (monotonic)
    alert: Alert


class Notifier:
    """Subscribe it to a Sampler (``sampler.subscribe(notifier)``); ``close()`` when done."""

    def __init__(
        self,
        url: str,
        fmt: str = "json",
        *,
        defaults: Defaults = DEFAULTS,
        clock: Callable[[], float] = time.monotonic,
        host: str | None = None,
    ) -> None:
        target, self.fmt = check_target(url, fmt)
        bare, self._secret = split_secret(target)
        self.url, self._auth = split_userinfo(bare)
        check_signing(self.fmt, self._secret)
        self.defaults = defaults
        self.clock = clock
        self.host = host or socket.gethostname()
        self.sent = 0
        self.failed = 0
        self.dropped = 0
        self.last_error: str | None = None
        # called on the notifier's thread with each Message delivered (the recorded history
        # keeps it: "disk-filling warned at 02:40 and was sent to slack")
        self.on_sent: Callable[[Message], None] | None = None
        self._told: dict[tuple[str, str], _Told] = {}
        self._queue: queue.Queue[Message | None] = queue.Queue(maxsize=defaults.notify_queue)
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._deliver, name="trainwatch-notify", daemon=True)
        self._thread.start()

    # -- sampler thread: compare and enqueue, never block ------------------------------
    def __call__(self, sample: Sample) -> None:
        if self._closing.is_set():
            return
        now = self.clock()
        active = {a.key: a for a in sample.warnings if a.severity in NOTIFY_SEVERITIES}
        for key in set(active) | set(self._told):
            told = self._told.get(key)
            is_on = key in active
            if told is not None and told.active == is_on:
                if not is_on and now - told.at >= self.defaults.notify_repeat_s:
                    del self._told[key]  # long settled: forget it
                continue
            if told is not None and now - told.at < self.defaults.notify_repeat_s:
                continue  # told within the repeat interval: tell later if it still holds
            alert = active[key] if is_on else told.alert  # type: ignore[union-attr]
            self._told[key] = _Told(is_on, now, alert)
            self._put(Message("started" if is_on else "cleared", alert, sample.t, self.host))

    def send(self, alert: Alert, state: str = "started") -> None:
        """Queue one message now, whatever the samples say (fix.report.notify: a warning
        training code raised itself, a save paused for space); never blocks."""
        if not self._closing.is_set():
            self._put(Message(state, alert, time.time(), self.host))

    def _put(self, msg: Message) -> None:
        try:
            self._queue.put_nowait(msg)
        except queue.Full:
            self.dropped += 1  # the webhook has been down for a while: newest wins
            try:
                self._queue.get_nowait()
                self._queue.put_nowait(msg)
            except (queue.Empty, queue.Full):
                pass

    # -- notifier thread ----------------------------------------------------------------
    def _deliver(self) -> None:
        while True:
            msg = self._queue.get()
            try:
                if msg is None or self._closing.is_set():
                    return
                self._send_with_retries(msg)
            finally:
                self._queue.task_done()

    def flush(self, timeout: float) -> bool:
        """Wait at most ``timeout`` seconds for the queued messages to be delivered (or to
        fail); True when none is left (a script about to exit: its last word goes out)."""
        deadline = time.monotonic() + timeout
        while self._queue.unfinished_tasks:
            if time.monotonic() >= deadline or not self._thread.is_alive():
                return False
            time.sleep(0.01)
        return True

    def _send_with_retries(self, msg: Message) -> None:
        d = self.defaults
        wait = d.notify_backoff_s
        for attempt in range(d.notify_retries + 1):
            try:
                self.post(body_of(msg, self.fmt))
                self.sent += 1
                if self.on_sent is not None:
                    self.on_sent(msg)
                return
            except _Refused as exc:
                self.last_error = str(exc)
                break
            except Exception as exc:  # network, timeout, 5xx, 429: worth another try
                self.last_error = redact(str(exc))
            if attempt == d.notify_retries or self._closing.wait(wait):
                break
            wait = min(wait * 2, d.notify_backoff_max_s)
        self.failed += 1
        log.warning(
            "trainwatch: could not notify %s of %s %s: %s",
            redact(self.url),
            msg.alert.code,
            msg.state,
            self.last_error,
        )

    def post(self, body: dict[str, Any]) -> None:
        """One POST; raises on failure (``_Refused`` when a retry would not help)."""
        url, body = signed(self.fmt, self.url, body, self._secret, time.time())
        data = json.dumps(body, ensure_ascii=False).encode()
        req = urllib.request.Request(
            url,
            data=data,
            method="POST",
            headers={"Content-Type": "application/json; charset=utf-8"},
        )
        if self._auth is not None:  # never carried over to a redirect's other host
            req.add_unredirected_header("Authorization", self._auth)
        try:
            with urllib.request.urlopen(req, timeout=self.defaults.notify_timeout_s) as resp:
                raw = resp.read(65536)
        except urllib.error.HTTPError as exc:
            if exc.code == 429 or exc.code >= 500:
                raise
            raise _Refused(f"HTTP {exc.code} {exc.reason}") from None
        error = _robot_error(self.fmt, raw)
        if error is not None:
            raise RuntimeError(error)  # robots rate-limit this way too: retry

    def close(self, timeout: float = 1.0) -> None:
        """Stop delivering; a message being sent gets ``timeout`` seconds to finish."""
        self._closing.set()
        with contextlib.suppress(queue.Full):
            self._queue.put_nowait(None)
        self._thread.join(timeout)


def make_notifier(url: str | None, fmt: str = "json", **kw: Any) -> Notifier | None:
    """A Notifier for a configured URL, None for none; ValueError (one line) for bad input."""
    if not url:
        check_target("http://x", fmt)  # a format without a URL is still checked
        return None
    return Notifier(url, fmt, **kw)
