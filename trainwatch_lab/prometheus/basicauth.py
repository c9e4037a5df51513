"""Basic auth with bcrypt hashes, as exporter-toolkit checks it.

bcrypt costs 70 ms at cost 10 and 270 ms at cost 12, on purpose. So, as exporter-toolkit:
every answer (right or wrong) is remembered by a keyed digest of user and password (never the
password itself), so Prometheus pays bcrypt once, not every scrape, and a flood that repeats
a wrong password pays it once too; an unknown user is compared against a dummy hash of the
users' cost, so the time of an answer does not tell which names exist. Right answers are kept
apart from wrong ones: a flood of new wrong passwords never evicts Prometheus's.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
import threading
from collections import OrderedDict

from ..core.defaults import DEFAULTS

BCRYPT = re.compile(rb"\$2[aby]\$(\d\d)\$[./A-Za-z0-9]{53}")


def bcrypt_cost(hashed: bytes) -> int | None:
    """The cost of a bcrypt hash, or None when it is none."""
    m = BCRYPT.fullmatch(hashed)
    return int(m.group(1)) if m and 4 <= int(m.group(1)) <= 31 else None


def credentials(authorization: str | None) -> tuple[str, str] | None:
    """(user, password) of a ``Basic`` ``Authorization`` header, None when there is none."""
    if not authorization or not authorization.startswith("Basic "):
        return None
    try:
        raw = base64.b64decode(authorization[6:], validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, sep, password = raw.partition(":")
    return (user, password) if sep else None


class BasicAuth:
    """The users of a web config and what was already decided about their passwords."""

    def __init__(self, users: dict[str, bytes], remember: int = DEFAULTS.serve_auth_cache) -> None:
        self.users = users
        self.remember = remember
        cost = max(bcrypt_cost(h) or 10 for h in users.values())
        import bcrypt

        # what an unknown user's password is compared with: the same work as a known user's
        self.dummy = bcrypt.hashpw(secrets.token_bytes(16), bcrypt.gensalt(rounds=cost))
        self._key = secrets.token_bytes(32)
        self._lock = threading.Lock()
        self._good: OrderedDict[bytes, None] = OrderedDict()
        self._bad: OrderedDict[bytes, None] = OrderedDict()

    def _token(self, user: str, password: str) -> bytes:
        return hmac.new(
            self._key, f"{len(user)}:{user}\0{password}".encode(), hashlib.sha256
        ).digest()

    def known(self, user: str, password: str) -> bool | None:
        """The remembered answer for these credentials (cheap: for an event loop), or None
        when bcrypt must decide (``check``)."""
        token = self._token(user, password)
        with self._lock:
            if token in self._good:
                return True
            if token in self._bad:
                return False
        return None

    def check(self, user: str, password: str) -> bool:
        """bcrypt decides (a known user against their hash, an unknown one against the
        dummy), and the answer is remembered. Blocking: off an event loop."""
        import bcrypt

        hashed = self.users.get(user)
        try:
            ok = bcrypt.checkpw(password.encode(), hashed or self.dummy) and hashed is not None
        except ValueError:  # a malformed hash in the file: nobody passes with it
            ok = False
        token = self._token(user, password)
        with self._lock:
            kept = self._good if ok else self._bad
            kept[token] = None
            kept.move_to_end(token)
            while len(kept) > self.remember:
                kept.popitem(last=False)
        return ok
