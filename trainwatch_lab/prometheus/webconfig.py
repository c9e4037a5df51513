"""TLS and basic auth for the agent, read from exporter-toolkit's ``--web.config.file``.

One file serves node_exporter and ``trainwatch-lab serve`` on a node (the format of
https://github.com/prometheus/exporter-toolkit/blob/master/docs/web-configuration.md)::

    tls_server_config:
      cert_file: /etc/node_exporter/node.crt
      key_file: /etc/node_exporter/node.key
      client_ca_file: /etc/prometheus/ca.crt   # optional: clients must show a certificate
      client_auth_type: RequireAndVerifyClientCert
      client_allowed_sans: [prometheus.example.org]
      min_version: TLS12
    http_server_config:
      headers: {X-Frame-Options: deny}
    basic_auth_users:
      prometheus: $2y$10$...   # bcrypt hash (htpasswd -nBC 10 "" | tr -d ':\\n')

Read as exporter-toolkit reads it (``yaml.UnmarshalStrict``): an unknown or duplicate key, a
value of the wrong type or a setting this agent cannot honour is one line (ValueError) and the
agent does not start; nothing is ignored. Relative file names are relative to the file's
directory. Reading YAML needs PyYAML and checking passwords needs bcrypt: ``pip install
trainwatch-lab[webconfig]``.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import ssl
from dataclasses import dataclass, field
from typing import Any

from .basicauth import BasicAuth, bcrypt_cost

TLS_VERSIONS = {
    "TLS10": ssl.TLSVersion.TLSv1,
    "TLS11": ssl.TLSVersion.TLSv1_1,
    "TLS12": ssl.TLSVersion.TLSv1_2,
    "TLS13": ssl.TLSVersion.TLSv1_3,
}
# the client_auth_type values Python's ssl can honour: it verifies every certificate it asks
# for, so RequestClientCert and RequireAnyClientCert (a certificate nobody checks) cannot be
CLIENT_AUTH = {
    "NoClientCert": ssl.CERT_NONE,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}
UNVERIFIED_CLIENT_AUTH = ("RequestClientCert", "RequireAnyClientCert", "RequireClientCert")
# Go's crypto/tls names (tls.CipherSuites()) -> OpenSSL's; TLS 1.3 suites are not
# configurable in Go either (cipher_suites applies up to TLS 1.2), so they are accepted as is
CIPHERS = {
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
}
TLS13_CIPHERS = ("TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256")
CURVES = {"CurveP256": "prime256v1", "CurveP384": "secp384r1", "CurveP521": "secp521r1"}
CURVES["X25519"] = "X25519"
# exporter-toolkit's headers and, where it restricts them, their values
HEADERS: dict[str, tuple[str, ...] | None] = {
    "Content-Security-Policy": None,
    "X-Frame-Options": ("deny", "sameorigin"),
    "X-Content-Type-Options": ("nosniff",),
    "X-XSS-Protection": None,
    "Strict-Transport-Security": None,
}
# every key of the schema, and its type (str, bool, list: of strings, dict: a section)
SCHEMA: dict[str, dict[str, type]] = {
    "": {
        "tls_server_config": dict,
        "http_server_config": dict,
        "basic_auth_users": dict,
        "auth_excluded_paths": list,
        "rate_limit": dict,
    },
    "tls_server_config": {
        "cert": str,
        "key": str,
        "client_ca": str,
        "cert_file": str,
        "key_file": str,
        "client_auth_type": str,
        "client_ca_file": str,
        "client_allowed_sans": list,
        "min_version": str,
        "max_version": str,
        "cipher_suites": list,
        "prefer_server_cipher_suites": bool,
        "curve_preferences": list,
    },
    "http_server_config": {"http2": bool, "headers": dict},
}
# any of these turns TLS on (exporter-toolkit's isTLSEnabled, with the inline forms)
TLS_ON = ("cert_file", "key_file", "cert", "key", "client_auth_type", "client_ca_file", "client_ca")
INLINE = (("cert", "cert_file"), ("key", "key_file"), ("client_ca", "client_ca_file"))
# what the schema has and this agent cannot do: refused, never ignored
UNSUPPORTED = {
    "rate_limit": "rate_limit is not supported by trainwatch-lab serve (use --web.max-requests)",
}


@dataclass
class WebConfig:
    """What the agent enforces: TLS (``context``, and the client SANs allowed), basic auth
    (``auth``), response headers, and the paths served without authentication."""

    context: ssl.SSLContext | None = None
    auth: BasicAuth | None = None
    allowed_sans: tuple[str, ...] = ()
    headers: dict[str, str] = field(default_factory=dict)
    excluded_paths: frozenset[str] = frozenset()

    @property
    def users(self) -> dict[str, bytes]:
        return self.auth.users if self.auth is not None else {}

    def client_allowed(self, peer: dict[str, Any] | None) -> bool:
        """Whether the client certificate (``SSLSocket.getpeercert()``) names one of
        ``client_allowed_sans`` (always, without the list), as exporter-toolkit matches:
        any DNS, IP, e-mail or URI SAN, exactly (IPs compared as addresses)."""
        if not self.allowed_sans:
            return True
        if not peer:
            return False
        names = {str(v) for _, v in peer.get("subjectAltName", ())}
        return any(_same_san(name, allowed) for name in names for allowed in self.allowed_sans)


def _same_san(name: str, allowed: str) -> bool:
    if name == allowed:
        return True
    with contextlib.suppress(ValueError):
        return ipaddress.ip_address(name) == ipaddress.ip_address(allowed)
    return False


def load(path: str) -> WebConfig:
    """The web config in ``path``; ValueError with one line for anything wrong in it."""
    try:
        import yaml
    except ImportError:
        raise ValueError(
            "--web.config.file needs PyYAML: pip install 'trainwatch-lab[webconfig]'"
        ) from None
    where = f"--web.config.file {path}"
    try:
        with open(path, encoding="utf-8") as fh:
            data = yaml.load(fh, Loader=_strict_loader(yaml)) or {}
    except OSError as exc:
        raise ValueError(f"{where}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise ValueError(f"{where}: not YAML ({_first_line(exc)})") from None
    except _Duplicate as exc:
        raise ValueError(f"{where}: key {exc.args[0]!r} is given twice") from None
    if not isinstance(data, dict):
        raise ValueError(f"{where}: expected a mapping at the top")
    _check_schema(where, data)
    base = os.path.dirname(os.path.abspath(path))
    tls = data.get("tls_server_config") or {}
    http = data.get("http_server_config") or {}
    config = WebConfig(
        headers=_headers(where, http.get("headers") or {}),
        excluded_paths=frozenset(data.get("auth_excluded_paths") or ()),
    )
    users = _users(where, data.get("basic_auth_users"))
    if users:
        try:
            import bcrypt  # noqa: F401  (checked here, where the file is given)
        except ImportError:
            raise ValueError(
                "--web.config.file: basic_auth_users needs bcrypt: "
                "pip install 'trainwatch-lab[webconfig]'"
            ) from None
        config.auth = BasicAuth(users)
    if any(tls.get(k) for k in TLS_ON):
        config.context = _context(f"{where}: tls_server_config", tls, base)
        config.allowed_sans = tuple(tls.get("client_allowed_sans") or ())
    elif tls:
        raise ValueError(f"{where}: tls_server_config needs cert_file and key_file")
    return config


class _Duplicate(Exception):
    pass


def _strict_loader(yaml: Any) -> Any:
    """PyYAML's safe loader refusing a key given twice (PyYAML keeps the last one, Go's
    strict decoding refuses it)."""

    class Strict(yaml.SafeLoader):
        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            seen: set[Any] = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                with contextlib.suppress(TypeError):
                    if key in seen:
                        raise _Duplicate(key)
                    seen.add(key)
            return super().construct_mapping(node, deep)

    return Strict


def _check_schema(where: str, data: dict[str, Any]) -> None:
    """Every key known and of its type, every list of strings: exporter-toolkit's schema."""
    for section, keys in SCHEMA.items():
        block = data if not section else data.get(section)
        if block is None:
            continue
        prefix = f"{section}." if section else ""
        if not isinstance(block, dict):
            raise ValueError(f"{where}: {section} must be a mapping")
        for key, value in block.items():
            if key not in keys:
                raise ValueError(
                    f"{where}: unknown key {prefix}{key!s} (exporter-toolkit's "
                    f"keys here: {', '.join(keys)})"
                )
            if value is None:
                continue
            kind = keys[key]
            if not isinstance(value, kind) or (kind is bool) != isinstance(value, bool):
                raise ValueError(f"{where}: {prefix}{key} must be a {_kind_name(kind)}")
            if kind is list and not all(isinstance(v, str) for v in value):
                raise ValueError(f"{where}: {prefix}{key} must be a list of strings")
    for key, why in UNSUPPORTED.items():
        if data.get(key) is not None:
            raise ValueError(f"{where}: {why}")


def _kind_name(kind: type) -> str:
    return {str: "string", bool: "boolean (true or false)", list: "list", dict: "mapping"}[kind]


def _headers(where: str, headers: dict[str, Any]) -> dict[str, str]:
    out = {}
    for name, value in headers.items():
        if name not in HEADERS:
            raise ValueError(
                f"{where}: HTTP header {name!r} cannot be configured (only {', '.join(HEADERS)})"
            )
        if not isinstance(value, str):
            raise ValueError(f"{where}: the value of header {name} must be a string")
        allowed = HEADERS[name]
        if allowed is not None and value.lower() not in allowed:
            raise ValueError(f"{where}: header {name} takes {' or '.join(allowed)}")
        if "\r" in value or "\n" in value:
            raise ValueError(f"{where}: the value of header {name} holds a line break")
        if value:  # blank: unset, as exporter-toolkit says
            out[name] = value
    return out


def _users(where: str, users: Any) -> dict[str, bytes]:
    if not users:
        return {}
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in users.items()):
        raise ValueError(f"{where}: basic_auth_users maps names to bcrypt hashes")
    bad = [k for k, v in users.items() if bcrypt_cost(v.encode()) is None]
    if bad:
        raise ValueError(f"{where}: the password of {bad[0]!r} is no bcrypt hash")
    return {k: v.encode() for k, v in users.items()}


def _context(where: str, tls: dict[str, Any], base: str) -> ssl.SSLContext:
    for inline, name in INLINE:
        if tls.get(inline) and tls.get(name):
            raise ValueError(f"{where}: give {inline} or {name}, not both")
    if not (tls.get("cert_file") or tls.get("cert")):
        raise ValueError(f"{where}: missing cert_file")
    if not (tls.get("key_file") or tls.get("key")):
        raise ValueError(f"{where}: missing key_file")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    versions = []
    for key, default in (("min_version", "TLS12"), ("max_version", "TLS13")):
        name = tls.get(key) or default
        if name not in TLS_VERSIONS:
            raise ValueError(f"{where}: {key} must be one of {', '.join(TLS_VERSIONS)}")
        versions.append(TLS_VERSIONS[name])
    if versions[0] > versions[1]:
        raise ValueError(f"{where}: min_version is above max_version")
    try:
        context.minimum_version, context.maximum_version = versions
        with _pem_files(tls, base) as (cert, key):
            context.load_cert_chain(cert, key)
        if tls.get("client_ca_file"):
            context.load_verify_locations(_joined(base, tls["client_ca_file"]))
        elif tls.get("client_ca"):
            context.load_verify_locations(cadata=tls["client_ca"])
    except (OSError, ssl.SSLError, ValueError) as exc:
        raise ValueError(f"{where}: {_first_line(exc)}") from None
    _ciphers(where, context, tls)
    kind = tls.get("client_auth_type") or "NoClientCert"
    if kind in UNVERIFIED_CLIENT_AUTH:
        raise ValueError(
            f"{where}: client_auth_type {kind} accepts certificates nobody verifies, which "
            f"trainwatch-lab serve cannot do; use RequireAndVerifyClientCert (or "
            f"VerifyClientCertIfGiven) with client_ca_file"
        )
    if kind not in CLIENT_AUTH:
        raise ValueError(f"{where}: client_auth_type must be one of {', '.join(CLIENT_AUTH)}")
    has_ca = bool(tls.get("client_ca_file") or tls.get("client_ca"))
    if has_ca and kind == "NoClientCert":
        raise ValueError(f"{where}: client_ca_file is given without a client_auth_type")
    if kind != "NoClientCert" and not has_ca:
        raise ValueError(f"{where}: client_auth_type {kind} needs client_ca_file")
    if tls.get("client_allowed_sans") and kind != "RequireAndVerifyClientCert":
        raise ValueError(
            f"{where}: client_allowed_sans needs client_auth_type RequireAndVerifyClientCert"
        )
    context.verify_mode = CLIENT_AUTH[kind]
    return context


def _ciphers(where: str, context: ssl.SSLContext, tls: dict[str, Any]) -> None:
    """``cipher_suites`` (Go's names), ``prefer_server_cipher_suites`` (default true) and
    ``curve_preferences`` (one curve: Python's ssl sets one)."""
    names = tls.get("cipher_suites") or []
    unknown = [n for n in names if n not in CIPHERS and n not in TLS13_CIPHERS]
    if unknown:
        raise ValueError(
            f"{where}: unknown cipher {unknown[0]!r} (Go's names, e.g. "
            "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256)"
        )
    chosen = [CIPHERS[n] for n in names if n in CIPHERS]
    if chosen:
        try:
            context.set_ciphers(":".join(chosen))
        except ssl.SSLError:
            raise ValueError(f"{where}: none of cipher_suites is available here") from None
    if tls.get("prefer_server_cipher_suites", True) is not False:
        context.options |= ssl.OP_CIPHER_SERVER_PREFERENCE
    else:
        context.options &= ~ssl.OP_CIPHER_SERVER_PREFERENCE
    curves = tls.get("curve_preferences") or []
    unknown = [c for c in curves if c not in CURVES]
    if unknown:
        raise ValueError(f"{where}: unknown curve {unknown[0]!r} ({', '.join(CURVES)})")
    if len(curves) > 1:
        raise ValueError(f"{where}: curve_preferences: trainwatch-lab serve can set one curve only")
    if curves:
        context.set_ecdh_curve(CURVES[curves[0]])


def _joined(base: str, name: str) -> str:
    return os.path.join(base, name)  # an absolute name stays as it is


@contextlib.contextmanager
def _pem_files(tls: dict[str, Any], base: str) -> Any:
    """The certificate and key as file names: the files given, or the inline PEM in
    anonymous memory files (``cert``/``key``), closed once loaded."""
    opened: list[int] = []
    try:
        names = []
        for inline, name in (("cert", "cert_file"), ("key", "key_file")):
            if tls.get(name):
                names.append(_joined(base, tls[name]))
                continue
            fd = os.memfd_create(f"trainwatch-{inline}", os.MFD_CLOEXEC)
            opened.append(fd)
            os.write(fd, tls[inline].encode())
            names.append(f"/proc/self/fd/{fd}")
        yield names[0], names[1]
    finally:
        for fd in opened:
            os.close(fd)


def _first_line(exc: BaseException) -> str:
    text = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return text.splitlines()[0] if text else type(exc).__name__
