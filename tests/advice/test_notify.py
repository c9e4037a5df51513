"""advice.notify against real local HTTP servers: one that records, one that hangs, one that
fails first; the repeat limit with an injected clock; bad targets refused."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import pytest

from tests.support.mounts import wait_until
from trainwatch_lab.advice.notify import (
    WECOM_MAX_BYTES,
    Notifier,
    check_target,
    make_notifier,
    redact,
)
from trainwatch_lab.core.defaults import DEFAULTS
from trainwatch_lab.core.model import Alert, Sample
from trainwatch_lab.core.sampler import Sampler

FAST = replace(DEFAULTS, notify_backoff_s=0.05, notify_backoff_max_s=0.2, notify_timeout_s=2.0)
FULL = Alert("disk-almost-full", "critical", "/data", "1.2 GiB of 500 GiB left.", "Free space.")
SLOW = Alert("slow-mount", "warning", "/mnt/nfs", "fsync p50 40 ms.", "Log locally.")
INFO = Alert("gpu-unavailable", "info", "gpu", "No NVIDIA driver.", "Nothing to do.")


class Webhook:
    """A local webhook: records each POST; ``mode`` says how it answers."""

    def __init__(
        self, mode: str = "ok", fail_first: int = 0, reply: bytes = b"{}", to: str = ""
    ) -> None:
        self.requests: list[dict[str, Any]] = []
        self.mode, self.fail_first, self.reply, self.to = mode, fail_first, reply, to
        self.release = threading.Event()
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                hook.requests.append(
                    {
                        "method": self.command,
                        "path": self.path,
                        "type": self.headers["Content-Type"],
                        "auth": self.headers["Authorization"],
                        "body": body,
                    }
                )
                if hook.mode == "redirect":  # elsewhere (``to``), as a moved endpoint says
                    self.send_response(302)
                    self.send_header("Location", hook.to)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if hook.mode == "hang":
                    hook.release.wait(30)
                    return
                failing = len(hook.requests) <= hook.fail_first
                self.send_response(503 if failing else 200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(hook.reply)

            do_GET = do_POST  # what a redirected POST becomes

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook/secret-token?key=abc"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(r["body"]) for r in self.requests]

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def webhook() -> Iterator[Any]:
    made: list[Webhook] = []

    def make(**kw: Any) -> Webhook:
        made.append(Webhook(**kw))
        return made[-1]

    yield make
    for hook in made:
        hook.close()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def sample(*alerts: Alert, t: float = 1.7e9) -> Sample:
    return Sample(t=t, warnings=list(alerts))


def test_json_carries_the_warning_host_and_time(webhook) -> None:
    hook = webhook()
    n = Notifier(hook.url, "json", defaults=FAST, host="node-7")
    try:
        n(sample(FULL, INFO))  # info is no reason to wake anyone
        assert wait_until(lambda: len(hook.requests) == 1, 5)
    finally:
        n.close()
    assert hook.requests[0]["type"].startswith("application/json")
    assert hook.bodies()[0] == {
        **FULL.to_json(),
        "state": "started",
        "host": "node-7",
        "time": 1.7e9,
    }


@pytest.mark.parametrize("fmt", ["slack", "dingtalk", "feishu", "wecom"])
def test_each_robot_gets_its_documented_body(webhook, fmt: str) -> None:
    hook = webhook(reply=b'{"errcode":0,"errmsg":"ok","code":0}')
    n = Notifier(hook.url, fmt, defaults=FAST, host="node-7")
    try:
        n(sample(SLOW))
        assert wait_until(lambda: len(hook.requests) == 1, 5)
    finally:
        n.close()
    body = hook.bodies()[0]
    if fmt == "slack":  # incoming webhook: {"text": ...}
        assert set(body) == {"text"}
        text = body["text"]
    elif fmt == "feishu":  # custom bot: {"msg_type": "text", "content": {"text": ...}}
        assert body["msg_type"] == "text" and set(body["content"]) == {"text"}
        text = body["content"]["text"]
    else:  # DingTalk custom robot and WeCom group robot: {"msgtype": "text", "text": {...}}
        assert body["msgtype"] == "text" and set(body["text"]) == {"content"}
        text = body["text"]["content"]
    assert "trainwatch" in text  # DingTalk's keyword security: add the keyword "trainwatch"
    for part in ("node-7", "slow-mount", "/mnt/nfs", "fsync p50 40 ms.", "Log locally."):
        assert part in text


def test_wecom_text_is_cut_to_its_limit() -> None:
    from trainwatch_lab.advice.notify import Message, body_of

    long = replace(SLOW, message="长" * 2000)
    body = body_of(Message("started", long, 0.0, "h"), "wecom")
    assert len(body["text"]["content"].encode()) <= WECOM_MAX_BYTES


def test_a_hanging_webhook_never_delays_a_sample(webhook) -> None:
    hook = webhook(mode="hang")
    n = Notifier(hook.url, "slack", defaults=replace(FAST, notify_timeout_s=30.0, notify_queue=8))

    def evaluate(s: Sample, h: object) -> list[Alert]:
        return [FULL, replace(SLOW, subject=str(s.t))]

    sampler = Sampler([], interval=0.05, evaluate=evaluate)
    sampler.subscribe(n)
    try:
        took = []
        for _ in range(40):  # a new warning every tick: a message queued every tick
            start = time.perf_counter()
            sampler.tick()
            took.append(time.perf_counter() - start)
        assert wait_until(lambda: len(hook.requests) >= 1, 5)  # the POST is hanging now
        start = time.perf_counter()
        n.close(timeout=0.2)
        assert time.perf_counter() - start < 1.0  # closing does not wait for the hang
    finally:
        hook.close()
    print(f"tick with a hanging webhook: max {max(took) * 1e3:.2f} ms")
    assert max(took) < 0.05
    assert n.dropped > 0  # the queue is bounded: 41 messages, room for 8


def test_a_failing_webhook_is_retried_with_backoff(webhook) -> None:
    hook = webhook(fail_first=2)
    n = Notifier(hook.url, "json", defaults=FAST)
    try:
        n(sample(FULL))
        assert wait_until(lambda: n.sent == 1, 10)
    finally:
        n.close()
    assert len(hook.requests) == 3 and n.failed == 0
    assert hook.bodies()[0] == hook.bodies()[2]


def test_a_robot_error_in_a_200_body_is_retried(webhook) -> None:
    hook = webhook(reply=b'{"errcode":130101,"errmsg":"send too fast"}')
    n = Notifier(hook.url, "dingtalk", defaults=replace(FAST, notify_retries=2))
    try:
        n(sample(FULL))
        assert wait_until(lambda: n.failed == 1, 10)
    finally:
        n.close()
    assert len(hook.requests) == 3 and n.sent == 0
    assert "130101" in (n.last_error or "")


def test_at_most_one_message_per_warning_per_ten_minutes_and_cleared(webhook) -> None:
    hook = webhook()
    clock = Clock()
    n = Notifier(hook.url, "json", defaults=FAST, clock=clock)
    try:
        n(sample(FULL))  # started: told at once
        clock.now += 60
        n(sample(FULL, SLOW))  # still on: nothing new for FULL; SLOW started
        clock.now += 60
        n(sample())  # both clear within 10 min of being told: held back
        clock.now += 60
        n(sample(FULL))  # FULL back: the webhook still thinks it is on, right
        assert wait_until(lambda: len(hook.requests) == 2, 5)
        time.sleep(0.2)
        assert [(b["code"], b["state"]) for b in hook.bodies()] == [
            ("disk-almost-full", "started"),
            ("slow-mount", "started"),
        ]
        clock.now += 500  # 10 min after SLOW was told, still clear: cleared now
        n(sample(FULL))
        assert wait_until(lambda: len(hook.requests) == 3, 5)
        assert hook.bodies()[2]["code"] == "slow-mount"
        assert hook.bodies()[2]["state"] == "cleared"
        n(sample())  # FULL clears long after it was told: cleared at once
        assert wait_until(lambda: len(hook.requests) == 4, 5)
        assert (hook.bodies()[3]["code"], hook.bodies()[3]["state"]) == (
            "disk-almost-full",
            "cleared",
        )
    finally:
        n.close()


@pytest.mark.parametrize(
    ("url", "fmt", "why"),
    [
        ("ftp://example.com/hook", "json", "http:// or https://"),
        ("file:///etc/passwd", "json", "http:// or https://"),
        ("example.com/hook", "json", "http:// or https://"),
        ("https://", "json", "http:// or https://"),
        ("https://example.com/hook", "teams", "one of json, slack, dingtalk, feishu, wecom"),
    ],
)
def test_bad_targets_are_refused_in_one_line(url: str, fmt: str, why: str) -> None:
    with pytest.raises(ValueError, match=why) as info:
        check_target(url, fmt)
    assert "\n" not in str(info.value)


def test_userinfo_in_the_url_is_sent_as_basic_auth_and_never_logged(webhook, caplog) -> None:
    """Issue 34 item 13: ``https://user:pass@host/...`` used to fail ("Name or service not
    known"); the userinfo (percent-decoded) goes as basic auth, never in the request line,
    and no log line shows the password."""
    hook = webhook(fail_first=1)
    port = hook.server.server_port
    url = f"http://bot%40team:p%3Ass%20w0rd@127.0.0.1:{port}/hook?x=1"
    n = Notifier(url, "json", defaults=replace(FAST, notify_retries=2), host="node-7")
    try:
        with caplog.at_level("DEBUG", logger="trainwatch_lab"):
            n(sample(FULL))
            assert wait_until(lambda: n.sent == 1, 5)
    finally:
        n.close()
    expected = "Basic " + base64.b64encode(b"bot@team:p:ss w0rd").decode()
    assert [r["auth"] for r in hook.requests] == [expected, expected]  # a retry too
    assert hook.requests[-1]["path"] == "/hook?x=1"
    assert "p%3Ass" not in n.url and "bot%40team" not in n.url
    assert "w0rd" not in caplog.text and "w0rd" not in repr(n.__dict__.get("url"))


def test_the_userinfo_is_never_sent_on_to_where_a_redirect_points(webhook) -> None:
    """The basic auth from ``user:pass@`` goes to the host the URL names only: a webhook
    that answers with a redirect to another host never sees the password (issue 34 item 13)."""
    elsewhere = webhook()
    moved = webhook(mode="redirect", to=elsewhere.url)
    url = f"http://bot:s3cret@127.0.0.1:{moved.server.server_port}/hook"
    n = Notifier(url, "json", defaults=replace(FAST, notify_retries=0), host="node-7")
    try:
        n(sample(FULL))
        assert wait_until(lambda: elsewhere.requests, 5)
    finally:
        n.close()
    assert moved.requests[0]["auth"] == "Basic " + base64.b64encode(b"bot:s3cret").decode()
    assert [r["auth"] for r in elsewhere.requests] == [None]


def test_no_url_is_no_notifier_and_secrets_stay_out_of_logs() -> None:
    assert make_notifier("", "json") is None
    with pytest.raises(ValueError):
        make_notifier(None, "bogus")
    shown = redact("https://oapi.dingtalk.com/robot/send?access_token=s3cret")
    assert "s3cret" not in shown
    assert "KEY" not in redact("https://open.feishu.cn/open-apis/bot/v2/hook/KEY")


# -- signed robots (advice.notify_sign): the signature checked by an independent computation --
SECRET = "SEC0123456789abcdef+/=秘密"


def _b64_hmac_sha256(key: bytes, msg: bytes) -> str:
    return base64.b64encode(hmac.new(key, msg, hashlib.sha256).digest()).decode()


def test_a_signed_dingtalk_robot_gets_timestamp_and_sign_in_the_url(webhook) -> None:
    hook = webhook(reply=b'{"errcode":0,"errmsg":"ok"}')
    before = time.time()
    n = Notifier(f"{hook.url}#secret={quote(SECRET)}", "dingtalk", defaults=FAST)
    try:
        n(sample(SLOW))
        assert wait_until(lambda: len(hook.requests) == 1, 5)
    finally:
        n.close()
    path = hook.requests[0]["path"]
    assert "SEC0123" not in path and "#" not in path  # the fragment is never sent
    query = parse_qs(urlsplit(path).query)
    assert query["key"] == ["abc"]  # the webhook's own query is kept, the signature appended
    (stamp,) = query["timestamp"]
    assert before * 1000 - 1 <= int(stamp) <= time.time() * 1000 + 1  # milliseconds, now
    expected = _b64_hmac_sha256(SECRET.encode(), f"{stamp}\n{SECRET}".encode())
    assert query["sign"] == [expected]  # parse_qs undid the urlencoding
    assert "%2B" in path or "+" not in expected  # '+' in the base64 went out urlencoded
    assert hook.bodies()[0]["msgtype"] == "text"


def test_a_signed_feishu_robot_gets_timestamp_and_sign_in_the_body(webhook) -> None:
    hook = webhook(reply=b'{"code":0,"msg":"success"}')
    before = int(time.time())
    n = Notifier(f"{hook.url}#secret={quote(SECRET)}", "feishu", defaults=FAST)
    try:
        n(sample(SLOW))
        assert wait_until(lambda: n.sent == 1, 5)
    finally:
        n.close()
    body = hook.bodies()[0]
    assert isinstance(body["timestamp"], str) and before <= int(body["timestamp"]) <= time.time()
    key = f"{body['timestamp']}\n{SECRET}".encode()
    assert body["sign"] == _b64_hmac_sha256(key, b"")  # the key signs an empty message
    assert body["msg_type"] == "text" and "slow-mount" in body["content"]["text"]
    assert "timestamp" not in hook.requests[0]["path"]


def test_unsigned_robots_carry_no_signature(webhook) -> None:
    hook = webhook(reply=b'{"errcode":0}')
    n = Notifier(hook.url, "dingtalk", defaults=FAST)
    try:
        n(sample(SLOW))
        assert wait_until(lambda: len(hook.requests) == 1, 5)
    finally:
        n.close()
    assert "sign=" not in hook.requests[0]["path"] and "sign" not in hook.bodies()[0]


@pytest.mark.parametrize(
    ("url", "fmt", "why"),
    [
        ("https://oapi.dingtalk.com/robot/send?access_token=t#secret=", "dingtalk", "secret="),
        ("https://oapi.dingtalk.com/robot/send?access_token=t#token=x", "dingtalk", "secret="),
        ("https://h.example/hook#secret=SECx&secret=SECy", "feishu", "secret="),
        ("https://hooks.slack.com/services/T/B/X#secret=SECx", "slack", "dingtalk and feishu"),
        ("https://h.example/hook#secret=SECx", "json", "dingtalk and feishu"),
        # the user forgot "secret=" or typed another separator: the fragment is the secret
        ("https://oapi.dingtalk.com/robot/send?access_token=t#SECx0123456789", "dingtalk", "#…"),
        ("https://h.example/hook#secret:SECx0123456789", "feishu", "#…"),
        ("h.example/hook#secret=SECx", "feishu", "http"),  # no scheme: redact keeps no #
    ],
)
def test_a_bad_secret_is_refused_in_one_line_without_showing_it(
    url: str, fmt: str, why: str
) -> None:
    with pytest.raises(ValueError, match=why) as info:
        make_notifier(url, fmt)
    assert "\n" not in str(info.value) and "SECx" not in str(info.value)
    assert "SECx" not in redact(url)
