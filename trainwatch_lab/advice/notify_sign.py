"""Signed robots: DingTalk's "加签" and Feishu's signature check (advice.notify).

A robot with signing turned on refuses every unsigned message, so the secret travels with the
webhook URL the user already gives, as its fragment: ``https://oapi.dingtalk.com/robot/send?
access_token=T#secret=SEC...``. A fragment is never sent in an HTTP request and every surface
(``--notify``, ``c.TrainWatch.notify_url``, ``%trainwatch --notify``) passes the URL through
whole, so no surface needs an option of its own; ``redact`` drops it from every message.

The algorithms, as the robots' documentation gives them (UTF-8 throughout):

- DingTalk: ``timestamp`` in milliseconds; ``sign = urlencode(base64(HMAC-SHA256(key=secret,
  msg=timestamp + "\\n" + secret)))``; ``&timestamp=...&sign=...`` appended to the URL. The
  timestamp must be within an hour of the robot's clock.
- Feishu: ``timestamp`` in seconds; ``sign = base64(HMAC-SHA256(key=timestamp + "\\n" +
  secret, msg=""))``; both go into the JSON body as strings.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import Any
from urllib.parse import parse_qsl, quote_plus, urlsplit, urlunsplit

SIGNED_FORMATS = ("dingtalk", "feishu")


def split_secret(url: str) -> tuple[str, str | None]:
    """``(url without its fragment, secret or None)``; ValueError (one line) for a fragment
    that is not ``secret=...``."""
    parts = urlsplit(url)
    if not parts.fragment:
        return url, None
    fields = parse_qsl(parts.fragment, keep_blank_values=True)
    keys = [k for k, _ in fields]
    if keys != ["secret"] or not fields[0][1].strip():
        raise ValueError(  # never echo the fragment: it is likely the secret itself
            "--notify: the part after '#' must be secret=<the robot's signing secret>, got "
            f"#… ({len(parts.fragment)} characters)"
        )
    return urlunsplit(parts._replace(fragment="")), fields[0][1].strip()


def check_signing(fmt: str, secret: str | None) -> None:
    """A secret only for a robot that signs: a silently unused secret would hide a typo."""
    if secret is not None and fmt not in SIGNED_FORMATS:
        raise ValueError(
            f"--notify: #secret= signs {' and '.join(SIGNED_FORMATS)} robots only, "
            f"not --notify-format {fmt}"
        )


def _b64_hmac(key: str, msg: str) -> str:
    digest = hmac.new(key.encode(), msg.encode(), hashlib.sha256).digest()
    return base64.b64encode(digest).decode()


def dingtalk_url(url: str, secret: str, now: float) -> str:
    """The webhook URL with DingTalk's ``timestamp`` (ms) and ``sign`` appended."""
    stamp = str(round(now * 1000))
    sign = quote_plus(_b64_hmac(secret, f"{stamp}\n{secret}"))
    return f"{url}{'&' if urlsplit(url).query else '?'}timestamp={stamp}&sign={sign}"


def feishu_fields(secret: str, now: float) -> dict[str, str]:
    """Feishu's ``timestamp`` (s) and ``sign`` for the JSON body."""
    stamp = str(int(now))
    return {"timestamp": stamp, "sign": _b64_hmac(f"{stamp}\n{secret}", "")}


def signed(
    fmt: str, url: str, body: dict[str, Any], secret: str | None, now: float
) -> tuple[str, dict[str, Any]]:
    """``(url, body)`` to POST: signed when there is a secret, computed per attempt (a retry
    an hour later must not carry a stale timestamp)."""
    if secret is None:
        return url, body
    if fmt == "dingtalk":
        return dingtalk_url(url, secret, now), body
    return url, {**feishu_fields(secret, now), **body}
