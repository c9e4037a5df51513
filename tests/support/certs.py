"""Real X.509 certificates for TLS tests, made with the ``openssl`` command: a CA, and server
or client certificates it signs with the SANs asked for, with the extensions (key usage, key
identifiers) that Python 3.13 verifies strictly (ssl.VERIFY_X509_STRICT)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.support.env import need_tool


@dataclass(frozen=True)
class Pair:
    cert: Path
    key: Path


def _openssl(*args: str) -> None:
    subprocess.run([need_tool("openssl"), *args], check=True, capture_output=True)


def make_ca(where: Path, name: str = "test-ca") -> Pair:
    pair = Pair(where / f"{name}.crt", where / f"{name}.key")
    _openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", f"/CN={name}",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        "-keyout", str(pair.key), "-out", str(pair.cert),
    )  # fmt: skip
    return pair


def make_cert(where: Path, ca: Pair, name: str, sans: str, client: bool = False) -> Pair:
    """A certificate for ``name`` signed by ``ca``; ``sans`` as openssl writes them
    (``DNS:a.example,IP:127.0.0.1``)."""
    pair = Pair(where / f"{name}.crt", where / f"{name}.key")
    csr, ext = where / f"{name}.csr", where / f"{name}.ext"
    usage = "clientAuth" if client else "serverAuth"
    # the extensions Python 3.13's strict verification (VERIFY_X509_STRICT) asks of a leaf
    ext.write_text(
        f"subjectAltName={sans}\nextendedKeyUsage={usage}\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\n"
        "subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n"
    )
    _openssl(
        "req", "-new", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}",
        "-keyout", str(pair.key), "-out", str(csr),
    )  # fmt: skip
    _openssl(
        "x509", "-req", "-in", str(csr), "-CA", str(ca.cert), "-CAkey", str(ca.key),
        "-CAcreateserial", "-days", "1", "-extfile", str(ext), "-out", str(pair.cert),
    )  # fmt: skip
    return pair
