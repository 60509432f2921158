"""Hardened serving: the one server of every port (the webhook, the progress endpoint, /healthz, /metrics).

Slow or numerous clients cannot hold it (slow-loris): a connection's TLS
handshake, and its request line and headers, get ``header_timeout``; its body
``body_timeout`` (408, closed) and at most the route's ``max_bytes`` (413);
beyond ``max_connections`` open connections a new one gets a 503 and is
closed. A port may also take at most ``connection_rate`` new connections a
second from one client address (a token bucket, ``connection_burst`` at
once): beyond, the connection is reset before its TLS handshake, the cost of
a flood of new connections (the progress port's; never the webhook's, whose
API server calls come from few addresses). Every listener is dual-stack (IPv4
and IPv6: any interface of both families), so probes and clients reach it on
IPv6-only clusters too. TLS is 1.2 or newer (``tls_min_version``) with AEAD
suites only (no CBC). A renewed certificate (cert-manager's, or a replaced
Secret) is served without a restart and without closing the listener:
mounted Secrets send no events, so the files are re-read every
``CERT_CHECK_SECONDS``, and once they have changed and load together, new
connections get a context of them (connections in flight go on). Files that
do not load at the start (the Secret the controller fills, ``certificates``,
mounted empty until then) keep the port closed, said in one log line, until
they do.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import logging
import pathlib
import socket
import ssl
import struct
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable

import aiohttp.web
import aiohttp.web_protocol

from rayjob_advisor.kube.config import OperatorConfig
from rayjob_advisor.kube.throttle import Buckets

CERT_CHECK_SECONDS = 10.0  # kopf's default is 60; a mounted Secret is updated within about a minute anyway
logger = logging.getLogger(__name__)

Handler = Callable[[aiohttp.web.Request, bytes], Awaitable[aiohttp.web.Response]]
"""A route's handler: the request, and its whole body (read within the limits)."""

AEAD_CIPHERS = "ECDHE+AESGCM:ECDHE+CHACHA20"  # TLS 1.2's forward-secret AEAD suites; TLS 1.3 has only AEAD ones
TLS_VERSIONS = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}


@dataclasses.dataclass(frozen=True)
class Certificate:
    """A server's certificate and key files, the oldest TLS version it speaks, and the CA of the client
    certificates it requires, if any (mutual TLS)."""

    certfile: str
    keyfile: str
    min_version: str = "1.2"  # a key of TLS_VERSIONS
    client_ca: str | None = None  # PEM file; None: no client certificate asked for

    def context(self) -> ssl.SSLContext:
        """A server context of these files (raises when they do not load together); a client certificate must be of
        ``client_ca`` alone (a server context trusts none of the system's CAs)."""
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.minimum_version = TLS_VERSIONS[self.min_version]
        context.set_ciphers(AEAD_CIPHERS)
        context.load_cert_chain(self.certfile, self.keyfile)
        if self.client_ca is not None:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(cafile=self.client_ca)
        return context

    def loads(self) -> bool:
        """Whether the files load together now."""
        try:
            self.context()
        except (OSError, ssl.SSLError):
            return False
        return True

    @classmethod
    def of(cls, config: OperatorConfig) -> Certificate | None:
        """The configured certificate; None when its files are not both given."""
        if not (config.tls_cert_file and config.tls_key_file):
            return None
        return cls(config.tls_cert_file, config.tls_key_file, config.tls_min_version)


@dataclasses.dataclass(frozen=True)
class Limits:
    """What one server gives any client: slow or numerous connections cannot hold it (slow-loris)."""

    header_timeout: float = 5.0  # TLS handshake; request line and headers (from the handshake or the last answer)
    body_timeout: float = 5.0  # the whole request body, once the headers are in
    max_connections: int = 256  # established connections; beyond: 503 and closed
    backlog: int = 128  # the listening socket's queue of connections not yet accepted
    connection_rate: float | None = None  # new connections a second from one address; beyond: reset; None: any
    connection_burst: float = 1.0  # new connections at once from one address

    @classmethod
    def of(cls, config: OperatorConfig) -> Limits:
        return cls(
            header_timeout=config.webhook_header_timeout_seconds,
            body_timeout=config.webhook_body_timeout_seconds,
            max_connections=config.webhook_max_connections,
        )


def post(path: str, handler: Handler, *, limits: Limits, max_bytes: int) -> aiohttp.web.RouteDef:
    """A POST route whose ``handler`` is given the whole body: 408 past ``body_timeout``, 413 past ``max_bytes``.

    aiohttp's own ``client_max_size`` bounds the size but not the time a body takes to come in.
    """

    async def serve(request: aiohttp.web.Request) -> aiohttp.web.Response:
        try:
            async with asyncio.timeout(limits.body_timeout):
                body = await _body(request, max_bytes)
        except TimeoutError:
            return await _closing(request, 408, f"the request body took over {limits.body_timeout:g} s")
        if len(body) > max_bytes:
            text = f"request body over {max_bytes} bytes"
            return aiohttp.web.Response(status=413, reason=text, text=text)
        return await handler(request, body)

    return aiohttp.web.post(path, serve)


async def _body(request: aiohttp.web.Request, max_bytes: int) -> bytes:
    """The request body, read up to one byte past ``max_bytes``: enough to tell a body too big."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.content.iter_any():
        chunks.append(chunk)
        size += len(chunk)
        if size > max_bytes:
            break
    return b"".join(chunks)


async def _closing(request: aiohttp.web.Request, status: int, text: str) -> aiohttp.web.Response:
    """Sent now, then the connection closed: aiohttp would otherwise linger to read the rest of the body."""
    response = aiohttp.web.Response(status=status, text=text)
    response.force_close()
    await response.prepare(request)
    await response.write_eof()
    request.protocol.force_close()
    return response


async def serve(
    routes: Iterable[aiohttp.web.RouteDef],
    *,
    port: int,
    limits: Limits,
    certificate: Certificate | None,
    check_interval: float,
) -> AsyncGenerator[None]:
    """Serves ``routes`` (over TLS with ``certificate``; None: plain HTTP) until closed; yields once listening (once
    the certificate's files load).

    Iterated further, it serves a renewed certificate to new connections (it never yields again).
    It listens on any interface of both address families.
    """
    context = await _loaded(certificate, check_interval) if certificate is not None else None
    app = aiohttp.web.Application()
    app.add_routes(routes)
    # aiohttp (3.14, as pinned) closes a connection still waiting for its request line and headers when
    # keepalive_timeout runs out: counted from the handshake or the previous answer, never extended
    # by the bytes that trickle in.
    # A body left unread (a 413) is drained for at most body_timeout before the connection closes.
    runner = aiohttp.web.AppRunner(
        app, handle_signals=False, keepalive_timeout=limits.header_timeout, lingering_time=limits.body_timeout
    )
    await runner.setup()
    try:
        site = _BoundedSite(runner, port, ssl_context=context, limits=limits)
        await site.start()
        yield
        if certificate is None:
            await asyncio.Event().wait()
            return
        while True:
            site.context = await _renewed(certificate, check_interval)
            logger.info(f"serving the renewed certificate on port {port}")
    finally:
        await runner.cleanup()


async def _loaded(certificate: Certificate, check_interval: float) -> ssl.SSLContext:
    """A context of the certificate's files, once they load (checked every ``check_interval`` seconds)."""
    said = False
    while True:
        try:
            return certificate.context()
        except (OSError, ssl.SSLError) as exc:
            if not said:
                logger.warning(f"not listening until the certificate files load: {exc}")
                said = True
        await asyncio.sleep(check_interval)


class Server:
    """``serve`` in the background: listening once ``start`` returns, or, while its certificate's files do not load
    yet, as soon as they do (``start`` does not wait for them); reloading its renewed certificate until ``stop``."""

    def __init__(
        self, routes: Iterable[aiohttp.web.RouteDef], *, port: int, limits: Limits, certificate: Certificate | None
    ) -> None:
        self._sites = serve(
            routes, port=port, limits=limits, certificate=certificate, check_interval=CERT_CHECK_SECONDS
        )
        self._certificate = certificate
        self._renewals: asyncio.Task[None] | None = None

    async def start(self) -> None:
        if self._certificate is None or self._certificate.loads():
            await anext(self._sites)  # listening
        self._renewals = asyncio.create_task(_exhausted(self._sites))  # the rest: waiting to listen, renewals

    async def stop(self) -> None:
        if self._renewals is not None:
            self._renewals.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._renewals
        await self._sites.aclose()


async def _exhausted(sites: AsyncGenerator[None]) -> None:
    """Runs ``serve`` on from where it is (it yields once, when listening)."""
    async for _ in sites:
        pass


async def _renewed(certificate: Certificate, check_interval: float) -> ssl.SSLContext:
    """A context of the files (the client CA's too) once they have changed and load together; until then, the old
    ones are served."""
    files = (certificate.certfile, certificate.keyfile, certificate.client_ca)
    paths = [pathlib.Path(file) for file in files if file is not None]

    def digest() -> str:
        hasher = hashlib.sha256()
        for path in paths:
            hasher.update(path.read_bytes())
        return hasher.hexdigest()

    initial = digest()
    while True:
        await asyncio.sleep(check_interval)
        try:
            if digest() != initial:
                return certificate.context()  # the files load together
        except (OSError, ssl.SSLError) as exc:  # half-written, or a key of another certificate: keep the old one
            logger.warning(f"the certificate files changed but do not load yet; still serving the old ones: {exc}")


class _BoundedSite(aiohttp.web.TCPSite):
    """aiohttp's TCP site with a TLS handshake timeout, at most ``max_connections`` established connections, and at
    most ``connection_rate`` new connections a second from one address.

    It listens in plain TCP: each connection's ``_Gate`` checks its address first and only then starts TLS with
    ``context`` (the live one: a renewal replaces it), so a connection refused for its address costs no handshake.
    Its host is None: asyncio listens on ``0.0.0.0`` and on ``::`` (IPv6-only), one socket per family.
    """

    def __init__(
        self,
        runner: aiohttp.web.AppRunner,
        port: int,
        *,
        ssl_context: ssl.SSLContext | None,
        limits: Limits,
    ) -> None:
        super().__init__(
            runner, None, port, ssl_context=ssl_context, backlog=limits.backlog, reuse_address=True, reuse_port=True
        )
        self.context = ssl_context
        self.limits = limits
        self._runner_server = runner.server
        self._addresses: Buckets[str] | None = None
        if limits.connection_rate is not None:
            self._addresses = Buckets(limits.connection_rate, limits.connection_burst)
        self._last_warning = 0.0

    async def start(self) -> None:
        await aiohttp.web.BaseSite.start(self)  # registers the site with its runner (TCPSite's would also listen)
        self._server = await asyncio.get_running_loop().create_server(
            self._protocol,
            self._host,
            self._port,
            backlog=self._backlog,
            reuse_address=self._reuse_address,
            reuse_port=self._reuse_port,
        )

    def _protocol(self) -> asyncio.Protocol:
        return _Gate(self)

    def admits(self, transport: asyncio.BaseTransport) -> bool:
        """Whether a new connection's address is within its rate; if not, the connection is reset (no FIN, no
        TIME_WAIT), which costs the server about nothing."""
        if self._addresses is None:
            return True
        peer = transport.get_extra_info("peername")
        address = str(peer[0]) if peer else ""
        if not self._addresses.take(address):
            return True
        transport.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        assert isinstance(transport, asyncio.Transport)
        transport.abort()
        self._warn(f"more than {self.limits.connection_rate:g} new connections a second from {address}: resetting")
        return False

    def full(self) -> bool:
        server = self._runner_server
        if server is None or len(server.connections) < self.limits.max_connections:
            return False
        self._warn(f"{self.limits.max_connections} connections open: refusing more (503)")
        return True

    def _warn(self, text: str) -> None:
        """``text`` in the log, at most once every 10 s: a flood must not flood the log too."""
        now = time.monotonic()
        if now - self._last_warning > 10:
            self._last_warning = now
            logger.warning(f"port {self._port}: {text}")


_BUSY = b"too many connections open; try again"
_BUSY_RESPONSE = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
    b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(_BUSY), _BUSY)
)


class _Gate(asyncio.Protocol):
    """One connection: reset at once if its address is over its rate (``admits``), then its TLS handshake, then
    aiohttp's protocol for it if the site is not full.

    A connection beyond the limit gets a 503 and is closed (the API server then fails open: ``failurePolicy:
    Ignore``; a progress reporter tries again with its next report). The count is aiohttp's own
    (``Server.connections``), exact: it grows in ``connection_made``.
    """

    def __init__(self, site: _BoundedSite) -> None:
        self._site = site
        self._handler: aiohttp.web_protocol.RequestHandler | None = None
        self._handshake: asyncio.Task[None] | None = None  # kept: the loop holds its tasks only weakly
        self._early: list[bytes] | None = None  # during the handshake: what came with its last bytes, kept for aiohttp

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if not self._site.admits(transport):
            return
        context = self._site.context
        if context is None:
            self._established(transport)
            return
        assert isinstance(transport, asyncio.Transport)
        transport.pause_reading()  # the client's hello waits for start_tls (which resumes reading)
        self._early = []
        self._handshake = asyncio.get_running_loop().create_task(self._tls(transport, context))

    async def _tls(self, transport: asyncio.Transport, context: ssl.SSLContext) -> None:
        """The TLS handshake, within ``header_timeout``; a failed one closes the connection (start_tls does)."""
        try:
            tls = await asyncio.get_running_loop().start_tls(
                transport, self, context, server_side=True, ssl_handshake_timeout=self._site.limits.header_timeout
            )
        except OSError:  # no TLS, a refused certificate, the handshake too slow (ConnectionAbortedError), a reset
            tls = None  # start_tls closed the connection
        early, self._early = self._early or [], None
        if tls is not None:
            self._established(tls)
        for data in early:
            self.data_received(data)

    def _established(self, transport: asyncio.BaseTransport) -> None:
        server = self._site._runner_server
        if server is None or self._site.full():
            assert isinstance(transport, asyncio.WriteTransport)
            transport.write(_BUSY_RESPONSE)
            transport.close()
            return
        self._handler = server()
        self._handler.connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._handler is not None:
            self._handler.connection_lost(exc)
            self._handler = None

    def data_received(self, data: bytes) -> None:
        if self._handler is not None:
            self._handler.data_received(data)
        elif self._early is not None:
            self._early.append(data)

    def eof_received(self) -> None:
        if self._handler is not None:
            self._handler.eof_received()

    def pause_writing(self) -> None:
        if self._handler is not None:
            self._handler.pause_writing()

    def resume_writing(self) -> None:
        if self._handler is not None:
            self._handler.resume_writing()
