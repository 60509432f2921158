"""The mutating admission webhook for RayJob CREATE (thin; stateless replicas).

It applies what ``application.advise`` decides before KubeRay builds the
cluster: the prediction, the plan and — in ``enforce`` mode, on CREATE
only — the resized worker group. It is fail-open: it never denies a RayJob,
whatever goes wrong (bad annotations, a profile not yet fitted, our own bug,
kopf's); the reason goes back as an admission warning, which ``kubectl
apply`` prints. Only a body that is no AdmissionReview gets an HTTP error
(4xx, see ``admission``). It has no side effects, so ``dryRun`` requests are
answered the same way (and not counted as rewrites). Webhook replicas watch
RuntimeProfiles read-only and fit them themselves: they write nothing to the
cluster.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import datetime as dt
import hashlib
import logging
import pathlib
import ssl
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

import aiohttp.web
import aiohttp.web_protocol
import kopf

from rayjob_advisor import admission, application, profiles, wiring
from rayjob_advisor.config import OperatorConfig
from rayjob_advisor.rayjob import merge

REGISTRY = wiring.registry()
CERT_CHECK_SECONDS = 10.0  # kopf's default is 60; a mounted Secret is updated within about a minute anyway
logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Limits:
    """What one webhook replica gives any client: slow or numerous connections cannot hold it (slow-loris)."""

    header_timeout: float = 5.0  # TLS handshake; request line and headers (from the handshake or the last answer)
    body_timeout: float = 5.0  # the whole request body, once the headers are in
    max_connections: int = 256  # established connections; beyond: 503 and closed
    backlog: int = 128  # the listening socket's queue of connections not yet accepted

    @classmethod
    def of(cls, config: OperatorConfig) -> Limits:
        return cls(
            header_timeout=config.webhook_header_timeout_seconds,
            body_timeout=config.webhook_body_timeout_seconds,
            max_connections=config.webhook_max_connections,
        )


class AdmissionServer(kopf.WebhookServer):
    """kopf's HTTPS server, with the AdmissionReview checked before kopf sees it, no 500s, and ``limits``.

    kopf's own ``_serve`` reads at most aiohttp's 1 MiB (a bigger, valid review
    got a 413) and answers 500 to several malformed envelopes. kopf's own
    ``__call__`` runs aiohttp with its defaults: an hour for a connection's
    headers, no limit on its body or on the number of connections. Like kopf's,
    it restarts with the new certificate when the files change (checked every
    ``file_check_interval`` seconds).
    """

    def __init__(self, *, limits: Limits = Limits(), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.limits = limits

    async def __call__(self, fn: kopf.WebhookFn) -> AsyncIterator[kopf.WebhookClientConfig]:
        """kopf's ``WebhookServer.__call__`` (1.45), with the limits on aiohttp's server and on the socket."""

        async def serve_fn(request: aiohttp.web.Request) -> aiohttp.web.Response:
            return await self._serve_within(fn, request)

        while True:
            cadata, context = self._build_ssl()
            path = self.path.rstrip("/") if self.path else ""
            app = aiohttp.web.Application()
            app.add_routes([aiohttp.web.post(f"{path}/{{id:.*}}", serve_fn)])
            # aiohttp (3.14, as pinned) closes a connection still waiting for its request line and headers when
            # keepalive_timeout runs out: counted from the handshake or the previous answer, never extended
            # by the bytes that trickle in.
            # A body left unread (a 413) is drained for at most body_timeout before the connection closes.
            runner = aiohttp.web.AppRunner(
                app,
                handle_signals=False,
                keepalive_timeout=self.limits.header_timeout,
                lingering_time=self.limits.body_timeout,
            )
            await runner.setup()
            try:
                addr = self.addr or None  # None is aiohttp's "any interface"
                port = self.port or self._allocate_free_port()
                site = _BoundedSite(runner, addr, port, ssl_context=context, limits=self.limits)
                await site.start()
                schema = "http" if context is None else "https"
                host = self.host or self.DEFAULT_HOST or self._get_accessible_addr(self.addr)
                logger.debug(f"Listening for webhooks at {self._build_url(schema, addr or '*', port, self.path or '')}")
                client_config = kopf.WebhookClientConfig(url=self._build_url(schema, host, port, self.path or ""))
                if cadata is not None:
                    client_config["caBundle"] = base64.b64encode(cadata).decode("ascii")
                yield client_config
                await self._until_files_change()
                logger.info("restarting the webhook server with the renewed certificate files")
            finally:
                await runner.cleanup()

    async def _until_files_change(self) -> None:
        """Returns once the certificate, key or CA files change (mounted Secrets send no events: re-read them)."""
        paths = [pathlib.Path(p) for p in (self.certfile, self.pkeyfile, self.cafile) if p is not None]
        if not paths:  # a self-signed certificate in memory: nothing to reload
            await asyncio.Event().wait()

        def digest() -> str:
            hasher = hashlib.sha256()
            for path in paths:
                hasher.update(path.read_bytes())
            return hasher.hexdigest()

        initial = digest()
        while True:
            await asyncio.sleep(self.file_check_interval)
            try:
                if digest() != initial:
                    self._check_certificate()
                    return
            except (OSError, ssl.SSLError) as exc:  # half-written, or a key of another certificate: keep the old one
                logger.warning(f"the certificate files changed but do not load yet; still serving the old ones: {exc}")

    def _check_certificate(self) -> None:
        """Raises unless the certificate files load together, as ``_build_ssl`` will load them."""
        if self.certfile is not None:
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(self.certfile, self.pkeyfile, self.password)

    async def _serve_within(self, fn: kopf.WebhookFn, request: aiohttp.web.Request) -> aiohttp.web.Response:
        """``_serve``, with the request body bounded in time: 408 and the connection closed past it."""
        try:
            async with asyncio.timeout(self.limits.body_timeout):
                body = await _body(request)
        except TimeoutError:
            # Sent now, then the connection closed: aiohttp would otherwise linger to read the rest of the body.
            text = f"the request body took over {self.limits.body_timeout:g} s"
            response = aiohttp.web.Response(status=408, text=text)
            response.force_close()
            await response.prepare(request)
            await response.write_eof()
            request.protocol.force_close()
            return response
        return await self._serve(fn, request, body)

    @staticmethod
    async def _serve(
        fn: kopf.WebhookFn, request: aiohttp.web.Request, body: bytes | None = None
    ) -> aiohttp.web.Response:
        try:
            data, review = admission.read_review(await _body(request) if body is None else body)
        except admission.BadReview as exc:
            reason = ascii(str(exc))[1:-1][:200]  # one line of ASCII in the status line; all of it in the body
            return aiohttp.web.Response(status=exc.status, reason=reason, text=str(exc))
        try:
            response: Mapping[str, Any] = await fn(
                data,  # type: ignore[arg-type]  # checked by the AdmissionReview model
                webhook=request.match_info.get("id"),
                headers=dict(request.headers),
                sslpeer=request.transport.get_extra_info("peercert") if request.transport else None,
            )
        except Exception as exc:  # fail open (also on a resource we do not handle); logged with its traceback
            logger.exception("the admission request failed; admitting the object unchanged")
            response = admission.unchanged(review, f"rayjob-advisor: could not answer: {type(exc).__name__}: {exc}")
        return aiohttp.web.json_response(response)


async def _body(request: aiohttp.web.Request) -> bytes:
    """The request body, read up to one byte past ``MAX_REQUEST_BYTES``: enough to tell a body too big."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.content.iter_any():
        chunks.append(chunk)
        size += len(chunk)
        if size > admission.MAX_REQUEST_BYTES:
            break
    return b"".join(chunks)


class _BoundedSite(aiohttp.web.TCPSite):
    """aiohttp's TCP site with a TLS handshake timeout and at most ``max_connections`` established connections."""

    def __init__(
        self,
        runner: aiohttp.web.AppRunner,
        host: str | None,
        port: int,
        *,
        ssl_context: ssl.SSLContext | None,
        limits: Limits,
    ) -> None:
        super().__init__(
            runner, host, port, ssl_context=ssl_context, backlog=limits.backlog, reuse_address=True, reuse_port=True
        )
        self._limits = limits
        self._runner_server = runner.server
        self._last_warning = 0.0

    async def start(self) -> None:
        await aiohttp.web.BaseSite.start(self)  # registers the site with its runner (TCPSite's would also listen)
        self._server = await asyncio.get_running_loop().create_server(
            self._protocol,
            self._host,
            self._port,
            ssl=self._ssl_context,
            backlog=self._backlog,
            reuse_address=self._reuse_address,
            reuse_port=self._reuse_port,
            ssl_handshake_timeout=self._limits.header_timeout if self._ssl_context is not None else None,
        )

    def _protocol(self) -> asyncio.Protocol:
        return _Gate(self)

    def full(self) -> bool:
        server = self._runner_server
        if server is None or len(server.connections) < self._limits.max_connections:
            return False
        now = time.monotonic()
        if now - self._last_warning > 10:
            self._last_warning = now
            logger.warning(f"{self._limits.max_connections} webhook connections open: refusing more (503)")
        return True


_BUSY = b"the webhook has too many connections open; try again"
_BUSY_RESPONSE = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
    b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(_BUSY), _BUSY)
)


class _Gate(asyncio.Protocol):
    """aiohttp's protocol for one connection, made once it is established (TLS done) if the site is not full.

    A connection beyond the limit gets a 503 and is closed: the API server fails open (``failurePolicy:
    Ignore``). The count is aiohttp's own (``Server.connections``), exact: it grows in ``connection_made``.
    """

    def __init__(self, site: _BoundedSite) -> None:
        self._site = site
        self._handler: aiohttp.web_protocol.RequestHandler | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
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

    def eof_received(self) -> None:
        if self._handler is not None:
            self._handler.eof_received()

    def pause_writing(self) -> None:
        if self._handler is not None:
            self._handler.pause_writing()

    def resume_writing(self) -> None:
        if self._handler is not None:
            self._handler.resume_writing()


def serve(settings: kopf.OperatorSettings, config: OperatorConfig) -> None:
    """HTTPS on ``webhook_port`` with the mounted certificate; the chart owns the webhook configuration.

    The certificate files are re-read every ``CERT_CHECK_SECONDS``: the server restarts with a renewed
    certificate (cert-manager's, or the chart's Secret replaced) without a new pod.
    """
    settings.admission.server = AdmissionServer(
        addr="0.0.0.0",
        port=config.webhook_port,
        certfile=config.tls_cert_file,
        pkeyfile=config.tls_key_file,
        file_check_interval=CERT_CHECK_SECONDS,
        limits=Limits.of(config),
    )
    settings.admission.managed = None


@kopf.on.mutate(
    *wiring.RAYJOBS, operations=["CREATE"], id="advise", ignore_failures=True, side_effects=False, registry=REGISTRY
)
def admit(
    body: kopf.Body,
    namespace: str | None,
    patch: kopf.Patch,
    warnings: list[str],
    dryrun: bool,
    memo: wiring.Memo,
    operation: str | None = None,
    **_: Any,
) -> None:
    """Apply the advice to the RayJob being created; its messages become admission warnings.

    kopf calls this for any operation sent to the webhook (``operations`` only
    goes into a webhook configuration it manages): only a CREATE may resize.
    """
    with memo.metrics.admission_duration.time():
        advice = _advice_or_unchanged(body, memo.store, memo.policy(namespace), may_resize=operation == "CREATE")
    warnings.extend(admission.warnings(advice.warnings))
    merge(patch, advice.patch)
    if advice.resized and not dryrun:
        memo.metrics.rewrites.labels("webhook").inc()


def _advice_or_unchanged(
    body: kopf.Body, store: profiles.ProfileStore, policy: application.Policy, *, may_resize: bool
) -> application.Advice:
    """Fail open: a profile still being fitted, or our own bug, admits the RayJob unchanged with a warning."""
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    try:
        advice = application.advise(body, store, policy=policy, may_resize=may_resize, now=now)
        return admission.within_limits(body, advice, may_resize=may_resize)
    except application.ProfileNotReady as exc:
        text = f"{exc}; admitted unchanged, the controller will predict shortly"
    except Exception as exc:  # fail open: our bug must never block a RayJob; logged with its traceback
        logger.exception("advice failed; admitting the RayJob unchanged")
        text = f"could not advise: {type(exc).__name__}: {exc}; admitted unchanged"
    return application.Advice(messages=(application.Message(reason="NotAdvised", text=text, warning=True),))
