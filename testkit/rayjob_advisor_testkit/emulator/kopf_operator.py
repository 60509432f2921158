"""A real kopf operator against the emulator, in its own thread and event loop, with test settings."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Collection, Iterator

import kopf
from kopf._cogs.structs.credentials import Vault  # kopf.operator(vault=...) takes it, kopf does not export it

from rayjob_advisor_testkit.emulator.server import Emulator
from rayjob_advisor_testkit.emulator.specs import ResourceSpec


def operator_settings(settings: kopf.OperatorSettings | None = None) -> kopf.OperatorSettings:
    """``settings`` (or new ones) tuned for tests: fast API retries; everything else as in production."""
    settings = settings if settings is not None else kopf.OperatorSettings()
    settings.networking.error_backoffs = [0.1, 0.2, 0.5, 1.0]
    return settings


def _watched_resources(registry: kopf.OperatorRegistry, specs: Collection[ResourceSpec]) -> set[str]:
    """The plurals kopf will watch for this registry, selected as kopf's own observer selects them."""
    selectors = (
        registry._indexing.get_all_selectors()
        | registry._watching.get_all_selectors()
        | registry._spawning.get_all_selectors()
        | registry._changing.get_all_selectors()
    )
    resources = [spec.kopf_resource() for spec in specs]
    return {resource.plural for selector in selectors for resource in selector.select(resources)}


@contextlib.contextmanager
def run_operator(
    emulator: Emulator,
    *,
    registry: kopf.OperatorRegistry | None = None,
    settings: kopf.OperatorSettings | None = None,
    namespaces: Collection[str] = (),
    memo: object | None = None,
    timeout: float = 10.0,
    peering_name: str | None = None,
    priority: int | None = None,
    standby: bool = False,
) -> Iterator[None]:
    """Run kopf against the emulator in a thread with its own loop, until the block ends.

    Enters once the operator watches every resource its registry handles (a WATCH request reached
    the emulator for each), not on kopf's ready flag, which is set before any watch starts. Can be
    entered again with the same emulator, to emulate operator restarts. Errors that crash the
    operator are re-raised on exit. With ``peering_name``, kopf's peering (leader election) is on;
    ``standby``: an operator expected to pause for a peer enters once it watches the peering only.
    """
    registry = registry if registry is not None else kopf.get_default_registry()
    settings = settings if settings is not None else operator_settings()
    expected = _watched_resources(registry, emulator.resources)
    if standby:
        expected = {"clusterkopfpeerings" if not namespaces else "kopfpeerings"}
    already_seen = len(emulator.requests())
    started: concurrent.futures.Future[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = concurrent.futures.Future()
    crashes: list[BaseException] = []

    async def operate() -> None:
        stop = asyncio.Event()
        started.set_result((asyncio.get_running_loop(), stop))
        await kopf.operator(
            registry=registry,
            settings=settings,
            clusterwide=not namespaces,
            namespaces=namespaces,
            standalone=peering_name is None,
            peering_name=peering_name,
            priority=priority,
            stop_flag=stop,
            memo=memo,
            vault=Vault({"emulator": kopf.ConnectionInfo(server=emulator.url)}),
        )

    def main() -> None:
        try:
            asyncio.run(operate())
        except BaseException as error:  # noqa: BLE001 - re-raised in the test's thread
            crashes.append(error)
            if not started.done():
                started.set_exception(error)

    thread = threading.Thread(target=main, name="kopf-operator", daemon=True)
    thread.start()
    loop, stop = started.result(timeout)

    def watching() -> bool:
        if not thread.is_alive():
            raise RuntimeError("the operator exited while starting") from (crashes[0] if crashes else None)
        watched = {r.resource for r in emulator.requests()[already_seen:] if r.verb == "watch"}
        return bool(watched) and expected <= watched

    try:
        emulator.wait_until(watching, timeout)
        yield
    finally:
        with contextlib.suppress(RuntimeError):  # the loop is closed already if the operator crashed
            loop.call_soon_threadsafe(stop.set)
        thread.join(timeout)
        if thread.is_alive():
            raise RuntimeError(f"the operator did not stop within {timeout} s")
    if crashes:
        raise crashes[0]
