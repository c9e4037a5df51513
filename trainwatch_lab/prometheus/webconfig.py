"""TLS and basic auth for the agent, read from exporter-toolkit's ``--web.config.file``.

One file serves node_exporter and ``trainwatch-lab serve`` on a node (the format of
https://github.com/prometheus/exporter-toolkit/blob/master/docs/web-configuration.md)::

    tls_server_config:
      cert_file: /etc/node_exporter/node.crt
      key_file: /etc/node_exporter/node.key
      client_ca_file: /etc/prometheus/ca.crt   # optional: clients must show a certificate
      client_auth_type: RequireAndVerifyClientCert
      min_version: TLS12
    basic_auth_users:
      prometheus: $2y$10$...   # bcrypt hash (htpasswd -nBC 10 "" | tr -d ':\\n')

Reading YAML needs PyYAML and checking passwords needs bcrypt: ``pip install
trainwatch-lab[webconfig]``. A password that matched is remembered (its hash's answer, by a
keyed digest, never the password itself) so a scrape pays bcrypt's cost once, not every time.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import ssl
import threading
from dataclasses import dataclass, field
from typing import Any

TLS_VERSIONS = {
    "TLS10": ssl.TLSVersion.TLSv1,
    "TLS11": ssl.TLSVersion.TLSv1_1,
    "TLS12": ssl.TLSVersion.TLSv1_2,
    "TLS13": ssl.TLSVersion.TLSv1_3,
}
CLIENT_AUTH = {
    "NoClientCert": ssl.CERT_NONE,
    "RequestClientCert": ssl.CERT_OPTIONAL,
    "RequireAnyClientCert": ssl.CERT_REQUIRED,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}
KNOWN = {"tls_server_config", "basic_auth_users", "http_server_config"}


@dataclass
class WebConfig:
    """What the agent enforces: TLS (``context``) and basic auth (``users``: bcrypt hashes)."""

    context: ssl.SSLContext | None = None
    users: dict[str, bytes] = field(default_factory=dict)
    _good: set[bytes] = field(default_factory=set)
    _key: bytes = field(default_factory=lambda: secrets.token_bytes(32))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def allows(self, authorization: str | None) -> bool:
        """Whether the ``Authorization`` header passes (always, without users)."""
        if not self.users:
            return True
        if not authorization or not authorization.startswith("Basic "):
            return False
        try:
            raw = base64.b64decode(authorization[6:], validate=True).decode()
            user, _, password = raw.partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return False
        hashed = self.users.get(user)
        if hashed is None:
            return False
        token = hmac.new(self._key, f"{user}\0{password}".encode(), hashlib.sha256).digest()
        with self._lock:
            if token in self._good:
                return True
        import bcrypt

        try:
            ok = bcrypt.checkpw(password.encode(), hashed)
        except ValueError:  # a malformed hash in the file: nobody passes with it
            return False
        if ok:
            with self._lock:
                self._good.add(token)
        return ok


def load(path: str) -> WebConfig:
    """The web config in ``path``; ValueError with one line for anything wrong in it."""
    try:
        import yaml
    except ImportError:
        raise ValueError(
            "--web.config.file needs PyYAML: pip install 'trainwatch-lab[webconfig]'"
        ) from None
    try:
        with open(path, encoding="utf-8") as fh:
            data = yaml.safe_load(fh) or {}
    except OSError as exc:
        raise ValueError(f"--web.config.file {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise ValueError(f"--web.config.file {path}: not YAML ({_first_line(exc)})") from None
    if not isinstance(data, dict):
        raise ValueError(f"--web.config.file {path}: expected a mapping at the top")
    unknown = sorted(set(data) - KNOWN)
    if unknown:
        raise ValueError(f"--web.config.file {path}: unknown key {unknown[0]!r}")
    config = WebConfig(users=_users(path, data.get("basic_auth_users")))
    tls = data.get("tls_server_config")
    if tls:
        config.context = _context(path, tls)
    if config.users:
        try:
            import bcrypt  # noqa: F401  (checked here, where the file is given)
        except ImportError:
            raise ValueError(
                "--web.config.file: basic_auth_users needs bcrypt: "
                "pip install 'trainwatch-lab[webconfig]'"
            ) from None
    return config


def _users(path: str, users: Any) -> dict[str, bytes]:
    if not users:
        return {}
    if not isinstance(users, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in users.items()
    ):
        raise ValueError(f"--web.config.file {path}: basic_auth_users maps names to bcrypt hashes")
    bad = [k for k, v in users.items() if not v.startswith(("$2a$", "$2b$", "$2y$"))]
    if bad:
        raise ValueError(f"--web.config.file {path}: the password of {bad[0]!r} is no bcrypt hash")
    return {k: v.encode() for k, v in users.items()}


def _context(path: str, tls: Any) -> ssl.SSLContext:
    where = f"--web.config.file {path}: tls_server_config"
    if not isinstance(tls, dict) or not tls.get("cert_file") or not tls.get("key_file"):
        raise ValueError(f"{where} needs cert_file and key_file")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    least = str(tls.get("min_version", "TLS12"))
    if least not in TLS_VERSIONS:
        raise ValueError(f"{where}: min_version must be one of {', '.join(TLS_VERSIONS)}")
    context.minimum_version = TLS_VERSIONS[least]
    try:
        context.load_cert_chain(tls["cert_file"], tls["key_file"])
        if tls.get("client_ca_file"):
            context.load_verify_locations(tls["client_ca_file"])
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(f"{where}: {_first_line(exc)}") from None
    verify = "RequireAndVerifyClientCert" if tls.get("client_ca_file") else "NoClientCert"
    kind = tls.get("client_auth_type", verify)
    if kind not in CLIENT_AUTH:
        raise ValueError(f"{where}: client_auth_type must be one of {', '.join(CLIENT_AUTH)}")
    context.verify_mode = CLIENT_AUTH[kind]
    return context


def _first_line(exc: BaseException) -> str:
    text = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return text.splitlines()[0] if text else type(exc).__name__
