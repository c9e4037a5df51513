"""Issue 34, items 2 and 3: the web config read as exporter-toolkit reads it (an unknown key
anywhere, a wrong type, a setting that cannot be honoured: one line, refused, never ignored),
and basic auth that spends the same bcrypt work on an unknown user as on a known one."""

from __future__ import annotations

import base64
import ssl
from pathlib import Path

import pytest

from tests.support.certs import Pair, make_ca, make_cert
from trainwatch_lab.prometheus import webconfig
from trainwatch_lab.prometheus.basicauth import credentials

bcrypt = pytest.importorskip("bcrypt")
pytest.importorskip("yaml")


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Pair]:
    where = tmp_path_factory.mktemp("pki")
    ca = make_ca(where)
    return {"ca": ca, "server": make_cert(where, ca, "server", "IP:127.0.0.1")}


def load(tmp_path: Path, text: str) -> webconfig.WebConfig:
    path = tmp_path / "web.yml"
    path.write_text(text)
    return webconfig.load(str(path))


def tls(pki: dict[str, Pair], extra: str = "") -> str:
    return (
        f"tls_server_config:\n  cert_file: {pki['server'].cert}\n"
        f"  key_file: {pki['server'].key}\n{extra}"
    )


@pytest.mark.parametrize(
    "extra, needle",
    [
        ("  min_versoin: TLS13\n", "unknown key tls_server_config.min_versoin"),
        ("  client_allowed_san: [a]\n", "unknown key tls_server_config.client_allowed_san"),
        ("  min_version: TLS14\n", "min_version must be one of"),
        ("  min_version: TLS13\n  max_version: TLS12\n", "min_version is above max_version"),
        ("  cipher_suites: [TLS_FANCY]\n", "unknown cipher 'TLS_FANCY'"),
        ("  cipher_suites: TLS_AES_128_GCM_SHA256\n", "cipher_suites must be a list"),
        ("  prefer_server_cipher_suites: yes please\n", "must be a boolean"),
        ("  curve_preferences: [X25519, CurveP256]\n", "one curve only"),
        ("  client_auth_type: RequireAnyClientCert\n", "nobody verifies"),
        ("  client_auth_type: RequireAndVerifyClientCert\n", "needs client_ca_file"),
        ("  client_ca_file: {ca}\n", "without a client_auth_type"),
        ("  client_allowed_sans: [prometheus]\n", "needs client_auth_type"),
        ("  cert_file: again.crt\n", "given twice"),
        ("http_server_config:\n  headers: {X-Powered-By: me}\n", "cannot be configured"),
        ("http_server_config:\n  headers: {X-Frame-Options: allow}\n", "deny or sameorigin"),
        ("http_server_config:\n  http3: true\n", "unknown key http_server_config.http3"),
        ("rate_limit: {interval: 1s, burst: 5}\n", "rate_limit is not supported"),
        ("basic_auth_users: [prometheus]\n", "basic_auth_users must be a mapping"),
    ],
)
def test_what_exporter_toolkit_refuses_is_refused_in_one_line(
    tmp_path: Path, pki: dict[str, Pair], extra: str, needle: str
) -> None:
    with pytest.raises(ValueError) as caught:
        load(tmp_path, tls(pki, extra.replace("{ca}", str(pki["ca"].cert))))
    assert needle in str(caught.value) and len(str(caught.value).splitlines()) == 1


def test_tls_keys_are_honoured(tmp_path: Path, pki: dict[str, Pair]) -> None:
    (tmp_path / "certs").mkdir()
    for name in ("cert", "key"):  # relative to the file's directory, as exporter-toolkit
        src = getattr(pki["server"], name)
        (tmp_path / "certs" / src.name).write_bytes(src.read_bytes())
    config = load(
        tmp_path,
        f"tls_server_config:\n  cert_file: certs/{pki['server'].cert.name}\n"
        f"  key_file: certs/{pki['server'].key.name}\n"
        f"  client_ca_file: {pki['ca'].cert}\n"
        "  client_auth_type: RequireAndVerifyClientCert\n"
        "  client_allowed_sans: [prometheus.example.org, '::1']\n"
        "  min_version: TLS12\n  max_version: TLS12\n"
        "  cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]\n"
        "  prefer_server_cipher_suites: false\n"
        "  curve_preferences: [CurveP384]\n"
        "http_server_config:\n  http2: false\n"
        "  headers: {X-Frame-Options: deny, X-Content-Type-Options: nosniff}\n",
    )
    context = config.context
    assert context is not None
    assert context.minimum_version == context.maximum_version == ssl.TLSVersion.TLSv1_2
    assert context.verify_mode == ssl.CERT_REQUIRED
    tls12 = [c["name"] for c in context.get_ciphers() if c["protocol"] == "TLSv1.2"]
    assert tls12 == ["ECDHE-RSA-AES128-GCM-SHA256"]
    assert not context.options & ssl.OP_CIPHER_SERVER_PREFERENCE
    assert config.headers == {"X-Frame-Options": "deny", "X-Content-Type-Options": "nosniff"}
    assert config.client_allowed({"subjectAltName": (("DNS", "prometheus.example.org"),)})
    assert config.client_allowed({"subjectAltName": (("IP Address", "0:0:0:0:0:0:0:1"),)})
    assert not config.client_allowed({"subjectAltName": (("DNS", "evil.example.org"),)})
    assert not config.client_allowed(None)


def test_inline_pem_is_read_as_the_files_are(tmp_path: Path, pki: dict[str, Pair]) -> None:
    cert, key = pki["server"].cert.read_text(), pki["server"].key.read_text()
    indent = "\n".join("    " + line for line in cert.splitlines())
    kindent = "\n".join("    " + line for line in key.splitlines())
    config = load(tmp_path, f"tls_server_config:\n  cert: |\n{indent}\n  key: |\n{kindent}\n")
    assert config.context is not None


def auth_header(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def test_an_unknown_user_costs_a_bcrypt_of_the_users_cost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hashed = bcrypt.hashpw(b"right-horse", bcrypt.gensalt(rounds=6)).decode()
    config = load(tmp_path, f"basic_auth_users:\n  prometheus: '{hashed}'\n")
    compared: list[bytes] = []
    real = bcrypt.checkpw

    def spy(password: bytes, against: bytes) -> bool:
        compared.append(against)
        return real(password, against)

    monkeypatch.setattr(bcrypt, "checkpw", spy)
    auth = config.auth
    assert auth is not None
    # what the agent's handler does: the remembered answer (on its loop), else bcrypt (off it)
    asked = [credentials(auth_header(u, p)) for u, p in WHO]
    assert [auth.known(*c) for c in asked] == [None, None, None]
    assert [auth.check(*c) for c in asked] == [False, False, True]
    # the same work for a name that does not exist as for one that does
    assert len(compared) == 3 and compared[0] != hashed.encode()
    assert {c[:7] for c in compared} == {b"$2b$06$"}
    # every answer remembered: asked again, nobody pays bcrypt
    assert [auth.known(*c) for c in asked] == [False, False, True]
    assert len(compared) == 3


WHO = (("nobody", "right-horse"), ("prometheus", "wrong-horse"), ("prometheus", "right-horse"))


def test_a_flood_of_wrong_passwords_never_evicts_the_right_one(tmp_path: Path) -> None:
    from trainwatch_lab.prometheus.basicauth import BasicAuth

    auth = BasicAuth({"p": bcrypt.hashpw(b"ok", bcrypt.gensalt(rounds=4))}, remember=4)
    assert auth.check("p", "ok")
    for n in range(10):
        assert not auth.check("p", f"wrong-{n}")
    assert auth.known("p", "ok") is True
    assert auth.known("p", "wrong-0") is None  # the oldest wrong ones forgotten: bounded
