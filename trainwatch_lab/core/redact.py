"""The one redaction of everything that leaves the process (issue 24): a URL, a header, a
setting or a command line goes to a log, an error, an API reply, a metric, an export or a
notification only through ``redact``.

What goes: the password of ``user:pass@`` in a URL (and a bare ``token@``), a URL's query
and fragment and the last part of a path of two or more (webhook robots carry their token
there), the value of every ``NAME=value``, ``NAME: value`` and ``--flag value`` whose name
holds token, key, secret, password, passwd, auth or credential (``--hf-token=...``,
``HF_TOKEN=...``, ``Authorization: Bearer ...``), and any long opaque token (20 or more
letters and digits in a row, with both). What stays: hosts, ports, words, paths of files.
"""

from __future__ import annotations

import re

__all__ = ["MASK", "SENSITIVE", "redact"]

MASK = "***"
SENSITIVE = r"(?:token|key|secret|password|passwd|auth|credential)"
_NAME = rf"[\w.-]*{SENSITIVE}[\w.-]*"
_URL = re.compile(  # "https ://" too: a mistyped URL is echoed by the error that refuses it
    r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*\s?://)(?P<user>[^\s/?#@]*@)?(?P<host>[^\s/?#]*)"
    r"(?P<path>[^\s?#]*)(?P<query>\?[^\s#]*)?(?P<frag>#\S*)?"
)
_BARE_URL = re.compile(  # hooks.slack.com/services/T/B/TOKEN: a URL without its scheme
    r"(?<![\w./-])(?P<host>[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+(?::\d+)?|[A-Za-z0-9-]+:\d+)"
    r"(?P<path>(?:/[^\s/?#]*){2,})(?P<query>\?[^\s#]*)?(?P<frag>#\S*)?"
)
_HEADER = re.compile(rf"(?P<name>{_NAME})(?P<sep>\s*:\s*)(?:Bearer|Basic|Token)\s+\S+", re.I)
_ASSIGN = re.compile(
    rf"(?P<name>{_NAME})(?P<sep>\s*[=:]\s*)(?P<value>\"[^\"]*\"|'[^']*'|[^\s\"',;&]+)", re.I
)
_FLAG = re.compile(rf"(?P<name>(?<!\S)--?{_NAME})(?P<sep>\s+)(?P<value>(?!-)[^\s\"']+)", re.I)
_OPAQUE = re.compile(r"[A-Za-z0-9_+=.~-]*[A-Za-z0-9+=]{20,}[A-Za-z0-9_+=.~-]*")


def _url(m: re.Match[str]) -> str:
    groups = m.groupdict()
    user = groups.get("user")
    if user:
        name = user[:-1].split(":", 1)[0] if ":" in user else ""
        user = f"{name}:{MASK}@" if name else f"{MASK}@"
    path = m["path"]
    if path.count("/") > 1:
        path = path.rsplit("/", 1)[0] + "/" + MASK
    scheme = groups.get("scheme") or ""
    return f"{scheme}{user or ''}{m['host']}{path}" + ("?" + MASK if m["query"] else "")


def _opaque(m: re.Match[str]) -> str:
    word = m.group(0)
    core = max(re.findall(r"[A-Za-z0-9+=]{20,}", word), key=len)
    mixed = any(c.isdigit() for c in core) and any(c.isalpha() for c in core)
    return MASK if mixed else word


def redact(text: str) -> str:
    """``text`` with every secret this module knows replaced by ``***``."""
    if not text:
        return text
    text = _BARE_URL.sub(_url, _URL.sub(_url, text))
    text = _HEADER.sub(lambda m: f"{m['name']}{m['sep']}{MASK}", text)
    text = _ASSIGN.sub(
        lambda m: m.group(0) if m["value"] == MASK else f"{m['name']}{m['sep']}{MASK}", text
    )
    text = _FLAG.sub(lambda m: f"{m['name']}{m['sep']}{MASK}", text)
    return _OPAQUE.sub(_opaque, text)
