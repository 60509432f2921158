"""The real rayjob-advisor operator, controller or webhook role, against the emulator: one context manager.

This module is the kit's only caller of ``rayjob_advisor.kube.run.operator_arguments``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import pathlib
import random
import socket
import tempfile
from collections.abc import Iterable, Iterator
from typing import Any, Literal

import kopf

from rayjob_advisor.errors import UnknownWorkload
from rayjob_advisor.kube import reports, run
from rayjob_advisor.kube.config import OperatorConfig
from rayjob_advisor_testkit.admission import Webhook
from rayjob_advisor_testkit.certificates import make_certificates
from rayjob_advisor_testkit.emulator import Emulator, operator_settings, run_operator
from rayjob_advisor_testkit.https import Endpoint
from rayjob_advisor_testkit.resources import AdvisorEmulator

QUICK_REFITS: dict[str, Any] = {"refit_interval_seconds": 0.1, "refit_duty": 1.0, "shipped_profiles": False}
"""Settings for tests: refits within a fraction of a second of a change, no shipped profile to hide a missing one."""

CONTROLLER_ACCOUNT = "system:serviceaccount:rayjob-advisor:rayjob-advisor-controller"
"""The controller's username, as the webhook role is told it (the chart: its controller's service account)."""


_LISTENING_PORTS = range(20000, 32768)
"""Where test servers listen: below Linux's ephemeral range (32768-60999), so no client connection of another
test can take a port between :func:`free_port` choosing it and the operator binding it (a bind(0) probe hands out
an ephemeral port, and CI once lost one that way), and above Ray's worker ports (10002-19999)."""

_handed_out: set[int] = set()


def free_port() -> int:
    """A TCP port nobody listens on now and no earlier call of this process handed out (for the operator's
    webhook, metrics, progress and liveness servers, which bind every interface)."""
    for port in random.sample(_LISTENING_PORTS, len(_LISTENING_PORTS)):
        if port in _handed_out:
            continue
        with socket.socket() as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as asyncio's servers bind
            try:
                probe.bind(("0.0.0.0", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    raise RuntimeError(f"no free TCP port in {_LISTENING_PORTS}")


def _accepting(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        return True
    return False


@dataclasses.dataclass(frozen=True)
class RunningAdvisor:
    """A running operator: the emulator it works against, its config (ports) and memo, and its HTTPS endpoints'
    clients."""

    api: Emulator
    config: OperatorConfig
    memo: Any  # rayjob_advisor's Memo: the profile store, metrics, ...
    ca: str | None  # the CA file of the certificate its HTTPS endpoints serve; None: it serves none
    _webhook: Webhook | None  # the controller role serves none
    _progress: Endpoint | None  # served only when asked for

    @property
    def webhook(self) -> Webhook:
        """An AdmissionReview client of the webhook role's HTTPS server, trusting its CA."""
        if self._webhook is None:
            raise RuntimeError("the controller role serves no webhook")
        return self._webhook

    @property
    def progress(self) -> Endpoint:
        """A client of the controller's progress endpoint (POST /progress), trusting its CA."""
        if self._progress is None:
            raise RuntimeError("no progress endpoint: running_advisor(progress=True) serves one")
        return self._progress

    def wait_for_model(self, workload: str, namespace: str = "default", timeout: float = 60) -> None:
        """Until the profile a RayJob of ``workload`` in ``namespace`` would use is loaded and fitted."""

        def fitted() -> bool:
            with contextlib.suppress(UnknownWorkload):  # not loaded yet
                return self.memo.store.find(namespace, workload).model is not None
            return False

        self.api.wait_until(fitted, timeout)


@contextlib.contextmanager
def running_advisor(
    role: Literal["controller", "webhook"] = "controller",
    *,
    api: Emulator | None = None,
    objects: Iterable[dict[str, Any]] = (),
    registry: kopf.OperatorRegistry | None = None,
    timeout: float = 30,
    standby: bool = False,
    progress: bool = False,
    **config: Any,
) -> Iterator[RunningAdvisor]:
    """Run the operator in ``role`` until the block ends; ``config``: OperatorConfig fields.

    Against ``api`` if given (enter again with the same one to emulate a restart: each run has a new
    memo), else against a new ``AdvisorEmulator`` holding ``objects``. No liveness or metrics server
    unless ``config`` asks for one; the webhook role gets a fresh CA and server certificate, a free
    port and a client; ``progress=True`` serves the controller's progress endpoint the same way.
    ``registry`` replaces the advisor's handlers, e.g. by a no-op baseline with the same settings.
    The block starts once kopf watches everything and the HTTPS ports accept.
    ``liveness_port=free_port()`` serves the operator's /healthz on every interface (as in production).
    ``peering="name"`` elects a leader among controllers (the peering object must exist); a ``standby``
    one, expected to wait for a live leader, starts once it watches the peering only.
    """
    with contextlib.ExitStack() as stack:
        if api is None:
            api = stack.enter_context(AdvisorEmulator())
        for obj in objects:
            api.create(obj)
        values: dict[str, Any] = {"liveness_port": 0, "metrics_port": 0}
        ca: str | None = None
        if role == "webhook" or progress:
            folder = pathlib.Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="advisor-tls-")))
            ca_file, cert, key = make_certificates(folder)
            ca = str(ca_file)
            values.update(tls_cert_file=str(cert), tls_key_file=str(key))
        if role == "webhook":
            values.update(webhook_port=free_port(), controller_account=CONTROLLER_ACCOUNT)
        if progress:
            values.update(progress_port=free_port())
        operator_config = OperatorConfig(**{**values, **config, "role": role, "kube_api": api.url})
        arguments = run.operator_arguments(operator_config)
        stack.enter_context(run_operator(
            api, registry=arguments["registry"] if registry is None else registry,
            settings=operator_settings(arguments["settings"]), namespaces=arguments["namespaces"],
            memo=arguments["memo"], timeout=timeout,
            peering_name=arguments["peering_name"], priority=arguments["priority"], standby=standby,
        ))  # fmt: skip
        webhook: Webhook | None = None
        progress_endpoint: Endpoint | None = None
        if ca is not None and role == "webhook":
            api.wait_until(lambda: _accepting(operator_config.webhook_port), timeout)
            webhook = Webhook(operator_config.webhook_port, ca)
        if ca is not None and progress:
            api.wait_until(lambda: _accepting(operator_config.progress_port), timeout)
            progress_endpoint = Endpoint(f"https://127.0.0.1:{operator_config.progress_port}{reports.PATH}", ca)
        yield RunningAdvisor(api, operator_config, arguments["memo"], ca, webhook, progress_endpoint)
