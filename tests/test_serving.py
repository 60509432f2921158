"""The hardened server every port shares (``serving``): the webhook role's admission, the controller's progress
reports, /healthz and /metrics, each run for real against the emulator: slow and numerous clients, big bodies,
renewed certificates, both address families."""

from __future__ import annotations

import contextlib
import dataclasses
import http.client
import json
import os
import pathlib
import socket
import ssl
import time
import urllib.error
import urllib.parse
from collections.abc import Iterator
from typing import Any

import pytest
import trustme

from rayjob_advisor.kube import admission, reports
from rayjob_advisor.kube import serving as serving_module
from rayjob_advisor_testkit.admission import Webhook
from rayjob_advisor_testkit.advisor import RunningAdvisor, free_port, running_advisor
from rayjob_advisor_testkit.certificates import make_certificates
from rayjob_advisor_testkit.https import Endpoint
from rayjob_advisor_testkit.rayjobs import make_rayjob

SERVERS = ["webhook", "progress"]
MAX_BYTES = {"webhook": admission.MAX_REQUEST_BYTES, "progress": reports.MAX_REPORT_BYTES}
# A request each answers at once, with no profile and no token: an AdmissionReview (admitted), a report without
# a token (refused).
ANSWERS = {"webhook": 200, "progress": 401}


@dataclasses.dataclass(frozen=True)
class Served:
    """One of the two servers, running: its operator, and its client (trusting its CA)."""

    kind: str
    advisor: RunningAdvisor
    endpoint: Endpoint

    @property
    def port(self) -> int:
        return self.advisor.config.webhook_port if self.kind == "webhook" else self.advisor.config.progress_port

    def answer(self, context: ssl.SSLContext | None = None, source: str | None = None) -> int:
        """The status of a request this server answers at once (``ANSWERS``), sent from ``source`` if given."""
        if self.kind == "webhook":
            body: dict[str, Any] = Webhook.envelope(make_rayjob())
        else:
            body = {"namespace": "default", "name": "x", "done": 1, "total": 2}
        return self.endpoint.post(json.dumps(body).encode(), context=context, source=source)[0]


@contextlib.contextmanager
def served(kind: str, **config: Any) -> Iterator[Served]:
    """The webhook role, or a controller with its progress endpoint, with ``config`` (OperatorConfig fields)."""
    role = "webhook" if kind == "webhook" else "controller"
    with running_advisor(role, progress=kind == "progress", **config) as advisor:
        yield Served(kind, advisor, advisor.webhook if kind == "webhook" else advisor.progress)


def _answers(server: Served, context: ssl.SSLContext | None = None) -> bool:
    with contextlib.suppress(urllib.error.URLError, ConnectionError):
        return server.answer(context) == ANSWERS[server.kind]
    return False


def _leaf(chain: pathlib.Path) -> bytes:
    """The first certificate of a PEM chain (the server's own), as DER."""
    end = "-----END CERTIFICATE-----"
    return ssl.PEM_cert_to_DER_cert(chain.read_text().split(end)[0] + end)


@pytest.mark.parametrize("kind", SERVERS)
def test_a_body_over_the_limit_gets_a_413_with_the_reason(kind):
    with served(kind) as server:
        status, reason, body = server.endpoint.post(json.dumps({"padding": "x" * MAX_BYTES[kind]}).encode())
        words = f"request body over {MAX_BYTES[kind]} bytes"
        assert (status, reason, body.decode()) == (413, words, words)
        assert server.answer() == ANSWERS[kind]  # and the server goes on


class SlowClient:
    """Connections that hold a server the way a slow-loris does: TLS done, then a request that never ends."""

    def __init__(self, server: Served) -> None:
        self.port = server.port
        self.context = server.endpoint.context
        path = urllib.parse.urlsplit(server.endpoint.url).path
        self.headers = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"

    def open(self, sent: str | None) -> socket.socket:
        """A connection that sent ``sent`` (after the headers) after its handshake; None: not even the handshake."""
        raw = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        if sent is None:
            return raw
        tls = self.context.wrap_socket(raw, server_hostname="127.0.0.1")
        tls.sendall((self.headers + sent).encode())
        return tls

    @staticmethod
    def answer(connection: socket.socket, timeout: float) -> tuple[bytes, float]:
        """(what the server sent back, how long it took to close) the connection; fails if it stays open."""
        start = time.monotonic()
        received = b""
        connection.settimeout(timeout)
        with connection, contextlib.suppress(ConnectionError, ssl.SSLError):
            while chunk := connection.recv(4096):  # socket.timeout (TimeoutError) fails the test
                received += chunk
        return received, time.monotonic() - start


@pytest.mark.parametrize("kind", SERVERS)
def test_slow_connections_are_dropped_while_requests_are_answered(kind):
    limits = {"webhook_header_timeout_seconds": 2, "webhook_body_timeout_seconds": 2}
    with served(kind, **limits) as server:
        slow = SlowClient(server)
        opened = time.monotonic()
        no_handshake = [slow.open(None) for _ in range(5)]
        partial_headers = [slow.open("") for _ in range(40)]
        partial_body = [slow.open("Content-Length: 1000\r\n\r\n{") for _ in range(5)]
        start = time.monotonic()
        assert server.answer() == ANSWERS[kind] and time.monotonic() - start < 1.5
        for connection in [*no_handshake, *partial_headers]:
            assert slow.answer(connection, 5)[0] == b""
        for connection in partial_body:
            assert slow.answer(connection, 5)[0].startswith(b"HTTP/1.1 408 ")
        assert 2 <= time.monotonic() - opened < 5


@pytest.mark.parametrize("kind", SERVERS)
def test_connections_beyond_the_limit_get_a_503_at_once(kind):
    with served(kind, webhook_header_timeout_seconds=2, webhook_max_connections=8) as server:
        slow = SlowClient(server)
        held = [slow.open("") for _ in range(8)]
        time.sleep(0.2)  # the server has seen them all
        refused = [slow.open("") for _ in range(4)]
        for connection in refused:
            received, took = slow.answer(connection, 5)
            assert received.startswith(b"HTTP/1.1 503 ") and took < 1
        for connection in held:
            assert slow.answer(connection, 5)[0] == b""
        assert server.answer() == ANSWERS[kind]


@pytest.mark.parametrize("kind", SERVERS)
def test_an_address_over_its_rate_of_new_connections_is_reset_before_tls_while_others_are_served(kind, monkeypatch):
    """The progress port resets an address's new connections beyond its burst at once, before any handshake (a
    flood of them costs no TLS); another address is answered meanwhile. The webhook port, whose API server calls
    come from few addresses, resets none. (A refill of 1 a second: a slow machine opening the flood slowly does
    not refill the bucket as it would at the real rate.)"""
    monkeypatch.setattr(reports, "CONNECTION_RATE", 1.0)
    burst = int(reports.CONNECTION_BURST)
    with served(kind) as server:
        # no TLS hello sent: the server holds them for header_timeout (5 s), unless it resets them (None: reset
        # before connect returned)
        flood = [_connected(server.port, "127.0.0.2") for _ in range(burst + 30)]
        if kind == "progress":  # resets arrive within moments; a held connection stays open for 5 s
            server.advisor.api.wait_until(lambda: [_open(c) for c in flood[burst:]].count(False) >= 20 or None, 3)
            assert all(_open(connection) for connection in flood[: burst // 2])
        else:
            time.sleep(0.3)
            assert all(_open(connection) for connection in flood)
        assert server.answer(source="127.0.0.3") == ANSWERS[kind]
        for connection in flood:
            if connection is not None:
                connection.close()


@pytest.mark.parametrize("kind", SERVERS)
def test_a_renewed_certificate_is_served_without_a_restart(kind, monkeypatch, tmp_path, caplog):
    monkeypatch.setattr(serving_module, "CERT_CHECK_SECONDS", 0.2)
    with served(kind) as server:
        config = server.advisor.config
        ca, cert, key = make_certificates(tmp_path)
        # A Secret volume swaps both files at once; one at a time, the server keeps the old pair until both load.
        os.replace(cert, str(config.tls_cert_file))
        half = "the certificate files changed but do not load yet"  # the new certificate, the old key
        server.advisor.api.wait_until(lambda: half in caplog.text, 10)  # a check ran between the two (not a sleep)
        os.replace(key, str(config.tls_key_file))
        renewed = ssl.create_default_context(cafile=str(ca))
        server.advisor.api.wait_until(lambda: _answers(server, renewed), 10)
        seen = ssl.get_server_certificate(("127.0.0.1", server.port))
        assert ssl.PEM_cert_to_DER_cert(seen) == _leaf(pathlib.Path(str(config.tls_cert_file)))
        with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
            server.answer()  # the old CA no longer verifies it
    assert half in caplog.text


def test_with_a_client_ca_the_webhook_completes_a_handshake_only_with_a_certificate_it_signed(tmp_path, monkeypatch):
    """Mutual TLS of the API server: no client certificate, or one of another CA (even one the system trusts), and
    no handshake; the API server's, and the AdmissionReview is answered. A renewed client CA is served within
    ``CERT_CHECK_SECONDS``, and the old one no longer is."""
    monkeypatch.setattr(serving_module, "CERT_CHECK_SECONDS", 0.2)
    api_server, other = trustme.CA(), trustme.CA()
    client_ca, system = tmp_path / "client-ca.pem", tmp_path / "system.pem"
    api_server.cert_pem.write_to_path(str(client_ca))
    other.cert_pem.write_to_path(str(system))
    monkeypatch.setenv("SSL_CERT_FILE", str(system))  # what ssl.create_default_context would trust
    with served("webhook", webhook_client_ca_file=str(client_ca)) as server:

        def presenting(ca: trustme.CA | None) -> ssl.SSLContext:
            context = ssl.create_default_context(cafile=server.advisor.ca)
            if ca is not None:
                ca.issue_cert("kube-apiserver").configure_cert(context)
            return context

        assert server.answer(presenting(api_server)) == ANSWERS["webhook"]
        for refused in (None, other):
            with pytest.raises(urllib.error.URLError):
                server.answer(presenting(refused))
        os.replace(system, client_ca)  # a ConfigMap volume swaps the file at once
        server.advisor.api.wait_until(lambda: _answers(server, presenting(other)), 10)
        with pytest.raises(urllib.error.URLError):
            server.answer(presenting(api_server))


def test_the_progress_port_asks_no_client_certificate(tmp_path):
    """Ray pods authenticate with tokens: the webhook's client CA is no business of the progress endpoint."""
    trustme.CA().cert_pem.write_to_path(str(tmp_path / "client-ca.pem"))
    with served("progress", webhook_client_ca_file=str(tmp_path / "client-ca.pem")) as server:
        assert server.answer() == ANSWERS["progress"]


PORTS = ["webhook", "progress", "healthz", "metrics"]
PATHS = {"webhook": "/advise", "progress": reports.PATH, "healthz": "/healthz", "metrics": "/metrics"}


@dataclasses.dataclass(frozen=True)
class Port:
    """One of the operator's listening ports, as a client reaches it: plain HTTP, or TLS trusting its CA."""

    number: int
    context: ssl.SSLContext | None
    path: str

    def connect(self, host: str = "127.0.0.1", handshake: bool = True, source: str | None = None) -> socket.socket:
        """A connection (its TLS handshake done if ``handshake``; from the address ``source`` if given) that has sent
        nothing yet."""
        raw = socket.create_connection((host, self.number), timeout=10, source_address=(source, 0) if source else None)
        if self.context is None or not handshake:
            return raw
        return self.context.wrap_socket(raw, server_hostname="127.0.0.1")

    def status(self, host: str = "127.0.0.1") -> int:
        """The status of a GET of ``path`` from ``host`` (405 on the POST-only endpoints: an answer all the same)."""
        connection = (
            http.client.HTTPSConnection(host, self.number, context=self.context, timeout=10)
            if self.context is not None
            else http.client.HTTPConnection(host, self.number, timeout=10)
        )
        try:
            connection.request("GET", self.path)
            return connection.getresponse().status
        finally:
            connection.close()


@contextlib.contextmanager
def listening(kind: str) -> Iterator[Port]:
    """The operator serving the port ``kind`` (``PORTS``), with its default limits."""
    if kind in SERVERS:
        with served(kind) as server:
            yield Port(server.port, server.endpoint.context, PATHS[kind])
        return
    port = free_port()
    with running_advisor(liveness_port=port if kind == "healthz" else 0, metrics_port=port if kind == "metrics" else 0):
        yield Port(port, None, PATHS[kind])


def _connected(port: int, source: str) -> socket.socket | None:
    """A TCP connection from ``source``; None when the server reset it before ``connect`` returned."""
    try:
        return socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0))
    except ConnectionResetError:
        return None


def _open(connection: socket.socket | None) -> bool:
    """Whether the server still holds ``connection`` (nothing to read, and not closed; None: never connected)."""
    if connection is None:
        return False
    connection.setblocking(False)
    try:
        return connection.recv(1) != b""
    except (BlockingIOError, ssl.SSLWantReadError):
        return True
    except OSError:  # reset, or a TLS alert
        return False


@pytest.mark.parametrize("kind", PORTS)
def test_slow_clients_are_dropped_on_every_port(kind):
    """150 connections that send nothing, or a request a byte at a time: at most 10 % are still open after 8 s,
    and the port answers meanwhile (kopf's /healthz and prometheus_client's /metrics held all 150). Each comes from
    an address of its own, as from many pods: within the progress port's rate of new connections per address."""
    with listening(kind) as port:
        request = f"GET {port.path} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: {'a' * 200}".encode()
        silent = [port.connect(handshake=False, source=f"127.0.1.{n}") for n in range(75)]
        trickling = [port.connect(source=f"127.0.2.{n}") for n in range(75)]
        start, sent = time.monotonic(), 0
        while time.monotonic() - start < 8:
            for connection in trickling:
                with contextlib.suppress(OSError):  # closed by the server
                    connection.send(request[sent : sent + 1])
            sent += 1
            time.sleep(0.2)
        assert port.status() in (200, 405)
        still_open = [connection for connection in [*silent, *trickling] if _open(connection)]
        assert len(still_open) <= 15
        for connection in [*silent, *trickling]:
            connection.close()


@pytest.mark.parametrize("kind", PORTS)
def test_every_port_answers_over_ipv4_and_ipv6(kind):
    """Dual-stack listeners: an IPv6-only cluster's kubelet, API server and pods reach them too."""
    with listening(kind) as port:
        assert port.status("127.0.0.1") in (200, 405)
        assert port.status("::1") in (200, 405)


@pytest.mark.parametrize("kind", SERVERS)
def test_tls_is_1_2_or_newer_with_aead_suites_only(kind):
    with served(kind) as server:
        cbc = ssl.create_default_context(cafile=server.advisor.ca)
        cbc.maximum_version = ssl.TLSVersion.TLSv1_2
        cbc.set_ciphers("ECDHE+AES+SHA1:ECDHE+AES+SHA256:ECDHE+AES+SHA384:AES+SHA1:AES+SHA256")  # CBC suites only
        assert not any(
            "GCM" in c["name"] or "CHACHA" in c["name"] for c in cbc.get_ciphers() if c["protocol"] == "TLSv1.2"
        )
        with pytest.raises(urllib.error.URLError):  # the server closes the handshake: no suite in common
            server.answer(cbc)
        old = ssl.create_default_context(cafile=server.advisor.ca)
        old.minimum_version = old.maximum_version = ssl.TLSVersion.TLSv1_1
        with pytest.raises(urllib.error.URLError):
            server.answer(old)
        aead = ssl.create_default_context(cafile=server.advisor.ca)
        aead.maximum_version = ssl.TLSVersion.TLSv1_2
        assert server.answer(aead) == ANSWERS[kind]


def test_tls_1_3_only_refuses_a_tls_1_2_client():
    with served("webhook", tls_min_version="1.3") as server:
        tls12 = ssl.create_default_context(cafile=server.advisor.ca)
        tls12.maximum_version = ssl.TLSVersion.TLSv1_2
        with pytest.raises(urllib.error.URLError):
            server.answer(tls12)
        assert server.answer() == ANSWERS["webhook"]


@pytest.mark.parametrize("kind", SERVERS)
def test_a_renewal_with_a_slow_request_in_flight_refuses_no_new_connection(kind, monkeypatch, tmp_path):
    """The renewed certificate is served to new connections: the listener is never closed (a restart of the
    server waited for the slow request and refused connections meanwhile)."""
    monkeypatch.setattr(serving_module, "CERT_CHECK_SECONDS", 0.2)
    with served(kind, webhook_body_timeout_seconds=10, webhook_header_timeout_seconds=10) as server:
        config = server.advisor.config
        ca, cert, key = make_certificates(tmp_path)
        either = ssl.create_default_context(cafile=server.advisor.ca)
        either.load_verify_locations(cafile=str(ca))
        slow = SlowClient(server).open("Content-Length: 1000\r\n\r\n{")  # a body that takes its time
        os.replace(key, str(config.tls_key_file))  # a Secret volume swaps both at once; close enough here
        os.replace(cert, str(config.tls_cert_file))
        renewed, failures, start = False, [], time.monotonic()
        while time.monotonic() - start < 4:
            try:
                assert server.answer(either) == ANSWERS[kind]
            except urllib.error.URLError as exc:
                failures.append(exc)
            seen = ssl.get_server_certificate(("127.0.0.1", server.port))
            renewed = renewed or ssl.PEM_cert_to_DER_cert(seen) == _leaf(pathlib.Path(str(config.tls_cert_file)))
            time.sleep(0.05)
        assert renewed and not failures
        slow.sendall(b"}")  # the request in flight is still being read
        slow.close()
