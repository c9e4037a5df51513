"""Issue 34, items 1-3 against real sockets: the agent keeps answering Prometheus while
clients hold idle connections, send headers a byte at a time or flood it with wrong
passwords; a GET's body is never read as a second request; the web config's TLS keys
(client_allowed_sans, cipher_suites, versions, headers) are honoured by a real TLS server.
Assertions are on answers, never on time (speed: tests/benchmarks/bench_agent_attacks.py)."""

from __future__ import annotations

import base64
import contextlib
import http.client
import select
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.prometheus.test_serve_load import agent_process, scrape
from tests.support.certs import Pair, make_ca, make_cert
from trainwatch_lab.core.sampler import Sampler
from trainwatch_lab.prometheus import webconfig
from trainwatch_lab.prometheus.agent import Agent
from trainwatch_lab.prometheus.agent_http import Limits


def responses(sock: socket.socket, count_until_closed: bool = False) -> list[int]:
    """The status codes of the responses read from ``sock`` until it is closed."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    codes = []
    while data:
        head, _, rest = data.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        codes.append(int(lines[0].split()[1]))
        length = next(
            (int(v) for k, _, v in (ln.partition(b":") for ln in lines[1:])
             if k.strip().lower() == b"content-length"),
            0,
        )  # fmt: skip
        data = rest[length:]
    return codes


@contextlib.contextmanager
def running(limits: Limits, web: webconfig.WebConfig | None = None) -> Iterator[Agent]:
    agent = Agent(Sampler([], interval=0.2), "127.0.0.1", 0, limits=limits, web_config=web)
    agent.start()
    try:
        yield agent
    finally:
        agent.stop()


class Blocking:
    """A collector whose ``collect`` waits for ``release``: a scrape held in flight."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def collect(self) -> list[object]:
        self.entered.set()
        self.release.wait(30)
        return []


def test_requests_past_the_limit_in_flight_get_503_and_idle_connections_count_for_none() -> None:
    with running(Limits(max_requests=1)) as agent:
        idle = [socket.create_connection(("127.0.0.1", agent.port)) for _ in range(5)]
        blocking = Blocking()
        agent.registry.register(blocking)  # type: ignore[arg-type]
        first = socket.create_connection(("127.0.0.1", agent.port), timeout=30)
        first.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert blocking.entered.wait(30)
        assert scrape(agent.port) == 503  # one request in flight already
        blocking.release.set()
        assert responses(first) == [200]
        agent.registry.unregister(blocking)  # type: ignore[arg-type]
        assert scrape(agent.port) == 200  # five idle connections still open
        for s in idle:
            s.close()
        first.close()


def test_a_get_body_is_read_as_its_body_never_as_a_second_request() -> None:
    smuggled = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
    with running(Limits()) as agent, socket.create_connection(("127.0.0.1", agent.port)) as s:
        s.settimeout(30)
        s.sendall(
            b"GET /x HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s"
            b"GET /y HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % (len(smuggled), smuggled)
        )
        # two requests were sent, two answers (404 each): none to the body's "request"
        assert responses(s) == [404, 404]


def test_the_whole_header_has_one_deadline_however_slowly_it_trickles_in() -> None:
    with running(Limits(idle_timeout_s=1.0)) as agent:
        s = socket.create_connection(("127.0.0.1", agent.port), timeout=30)
        header = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 200
        for byte in header:  # a byte every 0.2 s: 40 s for the header, 40 x the deadline
            try:
                s.sendall(bytes([byte]))
            except OSError:
                break
            if select.select([s], [], [], 0.2)[0]:
                break  # the agent closed it
        else:
            pytest.fail("the agent waited for a 40 s header sent a byte at a time")
        with contextlib.suppress(ConnectionResetError):
            assert s.recv(1024) == b""  # closed, with no answer
        s.close()


def test_60_idle_connections_leave_the_scrape_answered() -> None:
    with agent_process() as (_, port):
        held = [socket.create_connection(("127.0.0.1", port)) for _ in range(60)]
        try:
            assert [scrape(port) for _ in range(3)] == [200, 200, 200]
        finally:
            for s in held:
                s.close()


# -- TLS and basic auth -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Pair]:
    where = tmp_path_factory.mktemp("pki")
    ca = make_ca(where)
    return {
        "ca": ca,
        "server": make_cert(where, ca, "server", "IP:127.0.0.1"),
        "prometheus": make_cert(where, ca, "prometheus", "DNS:prom.example.org", client=True),
        "other": make_cert(where, ca, "other", "DNS:other.example.org", client=True),
    }


def tls_config(tmp_path: Path, pki: dict[str, Pair], extra: str = "") -> webconfig.WebConfig:
    path = tmp_path / "web.yml"
    path.write_text(
        f"tls_server_config:\n  cert_file: {pki['server'].cert}\n"
        f"  key_file: {pki['server'].key}\n{extra}"
    )
    return webconfig.load(str(path))


def tls_get(
    port: int, pki: dict[str, Pair], client: str | None = None, ciphers: str | None = None
) -> tuple[int, dict[str, str], str]:
    context = ssl.create_default_context(cafile=str(pki["ca"].cert))
    if client is not None:
        context.load_cert_chain(str(pki[client].cert), str(pki[client].key))
    if ciphers is not None:
        context.maximum_version = ssl.TLSVersion.TLSv1_2
        context.set_ciphers(ciphers)
    conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=30, context=context)
    try:
        conn.request("GET", "/metrics")
        resp = conn.getresponse()
        resp.read()
        cipher = conn.sock.cipher()[0]  # type: ignore[union-attr]
        return resp.status, dict(resp.getheaders()), cipher
    finally:
        conn.close()


def test_client_allowed_sans_and_headers_are_honoured(tmp_path: Path, pki: dict[str, Pair]) -> None:
    pytest.importorskip("yaml")
    web = tls_config(
        tmp_path,
        pki,
        f"  client_ca_file: {pki['ca'].cert}\n  client_auth_type: RequireAndVerifyClientCert\n"
        "  client_allowed_sans: [prom.example.org]\n"
        "http_server_config:\n  headers: {X-Frame-Options: deny}\n",
    )
    with running(Limits(), web) as agent:
        status, headers, _ = tls_get(agent.port, pki, "prometheus")
        assert status == 200 and headers["X-Frame-Options"] == "deny"
        assert tls_get(agent.port, pki, "other")[0] == 401  # verified, but not an allowed SAN
        with pytest.raises((ssl.SSLError, ConnectionError)):
            tls_get(agent.port, pki)  # no certificate at all


def test_cipher_suites_and_versions_are_honoured(tmp_path: Path, pki: dict[str, Pair]) -> None:
    pytest.importorskip("yaml")
    web = tls_config(
        tmp_path,
        pki,
        "  max_version: TLS12\n  cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]\n",
    )
    with running(Limits(), web) as agent:
        assert tls_get(agent.port, pki)[2] == "ECDHE-RSA-AES128-GCM-SHA256"
        with pytest.raises(ssl.SSLError):
            tls_get(agent.port, pki, ciphers="ECDHE-RSA-AES256-GCM-SHA384")


def test_a_wrong_password_flood_leaves_prometheus_answered(tmp_path: Path) -> None:
    bcrypt = pytest.importorskip("bcrypt")
    pytest.importorskip("yaml")
    hashed = bcrypt.hashpw(b"right-horse", bcrypt.gensalt(rounds=8)).decode()
    config = tmp_path / "web.yml"
    config.write_text(f"basic_auth_users:\n  prometheus: '{hashed}'\n")

    def get(conn: http.client.HTTPConnection, password: str) -> int:
        token = base64.b64encode(f"prometheus:{password}".encode()).decode()
        conn.request("GET", "/metrics", headers={"Authorization": f"Basic {token}"})
        resp = conn.getresponse()
        resp.read()
        return resp.status

    with agent_process("--web.config.file", str(config)) as (_, port):
        assert get(http.client.HTTPConnection("127.0.0.1", port, timeout=30), "right-horse") == 200
        stop, sent, codes = threading.Event(), [0], set()
        lock = threading.Lock()

        def flood(n: int) -> None:  # kept-alive connections, a new wrong password each time
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            i = 0
            while not stop.is_set():
                with contextlib.suppress(OSError, http.client.HTTPException):
                    code = get(conn, f"wrong-{n}-{i}")
                    with lock:
                        sent[0] += 1
                        codes.add(code)
                i += 1
            conn.close()

        threads = [threading.Thread(target=flood, args=(n,), daemon=True) for n in range(60)]
        for t in threads:
            t.start()
        try:
            assert wait_for_count(sent, 120)  # the flood is on, every connection open
            answers = [
                get(http.client.HTTPConnection("127.0.0.1", port, timeout=30), "right-horse")
                for _ in range(10)
            ]
        finally:
            stop.set()
            for t in threads:
                t.join(60)
        assert answers == [200] * 10
        assert codes <= {401, 503} and 401 in codes  # the flood refused, some by bcrypt


def test_auth_excluded_paths_are_served_without_a_password(tmp_path: Path) -> None:
    bcrypt = pytest.importorskip("bcrypt")
    pytest.importorskip("yaml")
    hashed = bcrypt.hashpw(b"right-horse", bcrypt.gensalt(rounds=4)).decode()
    path = tmp_path / "web.yml"
    path.write_text(f"basic_auth_users:\n  prometheus: '{hashed}'\nauth_excluded_paths: [/]\n")
    with running(Limits(), webconfig.load(str(path))) as agent:
        conn = http.client.HTTPConnection("127.0.0.1", agent.port, timeout=30)
        for where, code in (("/", 200), ("/metrics", 401)):
            conn.request("GET", where)
            resp = conn.getresponse()
            resp.read()
            assert resp.status == code, where
        conn.close()


def wait_for_count(counter: list[int], target: int) -> bool:
    from tests.prometheus.conftest import wait_for

    return bool(wait_for(lambda: counter[0] >= target, 120, 0.1))


# -- TLS reconnect churn and half-open handshakes (issue 34 item 1: 21 of 21 scrapes failed) --
def client_hello_start(context: ssl.SSLContext) -> bytes:
    """The first half of a real ClientHello: a handshake begun and never finished."""
    client = context.wrap_bio(ssl.MemoryBIO(), out := ssl.MemoryBIO(), server_hostname="x")
    with contextlib.suppress(ssl.SSLWantReadError):
        client.do_handshake()
    hello = out.read()
    return hello[: len(hello) // 2]


@pytest.mark.parametrize(
    ("churners", "half_open"),
    [(16, 0), (0, 40), (16, 40)],
    ids=["reconnect-churn", "half-open-handshakes", "both"],
)
def test_tls_churn_and_half_open_handshakes_leave_every_scrape_answered(
    tmp_path: Path, pki: dict[str, Pair], churners: int, half_open: int
) -> None:
    """``churners`` clients completing TLS handshakes and closing as fast as they can and
    ``half_open`` more holding a handshake half-open (half a ClientHello, or nothing, then
    silence; one the agent closes opens again), while Prometheus scrapes over TLS on a new
    connection each time: every scrape answered. The hand-written server of e9cafdf failed
    all 10 with half-open handshakes (its 40 connection slots, each a thread in
    do_handshake for up to 10 s, went to them); churn alone it answered on this machine."""
    pytest.importorskip("yaml")
    from tests.prometheus.conftest import wait_for

    config = tmp_path / "web.yml"
    config.write_text(
        f"tls_server_config:\n  cert_file: {pki['server'].cert}\n  key_file: {pki['server'].key}\n"
    )
    context = ssl.create_default_context(cafile=str(pki["ca"].cert))
    partial = client_hello_start(context)
    stop, lock = threading.Event(), threading.Lock()
    churned, handshakes, held = [0], [0], [0]

    with agent_process("--web.config.file", str(config)) as (_, port):

        def churn() -> None:
            while not stop.is_set():
                with lock:
                    churned[0] += 1
                with (
                    contextlib.suppress(OSError),
                    socket.create_connection(("127.0.0.1", port), timeout=30) as raw,
                    context.wrap_socket(raw, server_hostname="127.0.0.1"),
                    lock,
                ):
                    handshakes[0] += 1

        def hold(n: int) -> None:
            hello = partial if n % 2 else b""  # half a ClientHello, or not a byte
            while not stop.is_set():
                try:
                    s = socket.create_connection(("127.0.0.1", port), timeout=30)
                except OSError:
                    stop.wait(0.1)
                    continue
                with s, contextlib.suppress(OSError):
                    s.sendall(hello)
                    with lock:
                        held[0] += 1
                    try:  # silent until the agent closes it (then another) or the end
                        while not stop.is_set() and not select.select([s], [], [], 0.2)[0]:
                            pass
                    finally:
                        with lock:
                            held[0] -= 1

        threads = [threading.Thread(target=churn, daemon=True) for _ in range(churners)]
        threads += [threading.Thread(target=hold, args=(n,), daemon=True) for n in range(half_open)]
        for t in threads:
            t.start()
        answers: list[int | str] = []
        try:
            assert wait_for(
                lambda: churned[0] >= min(50, churners * 50) and held[0] >= half_open, 120, 0.1
            ), f"the attack never got going: {churned[0]} connections, {held[0]} held"
            before, holding = churned[0], held[0]
            for _ in range(10):
                try:
                    answers.append(tls_get(port, pki)[0])
                except (OSError, http.client.HTTPException) as exc:
                    answers.append(type(exc).__name__)
            during = churned[0] - before
        finally:
            stop.set()
            for t in threads:
                t.join(60)
        assert not [t for t in threads if t.is_alive()], "an attacker did not stop"
        assert answers == [200] * 10, (
            f"{during} churned connections ({handshakes[0]} handshakes in all) and "
            f"{holding} half-open ones meanwhile"
        )
