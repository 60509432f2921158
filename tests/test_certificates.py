"""Certificates the operator keeps itself (``certificates.mode: operator``) and the CA's ConfigMap handed to jobs."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import socket
import ssl

import aiohttp.web
import pytest
from cryptography import x509

from rayjob_advisor import contract as ann
from rayjob_advisor.kube import certificates, serving
from rayjob_advisor_testkit.admission import Webhook
from rayjob_advisor_testkit.advisor import free_port, running_advisor
from rayjob_advisor_testkit.chart import by_kind, render
from rayjob_advisor_testkit.profiles import profile_manifest
from rayjob_advisor_testkit.rayjobs import make_rayjob
from rayjob_advisor_testkit.resources import AdvisorEmulator

NOW = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)
NAMES = ("advisor-rayjob-advisor-webhook", "advisor-rayjob-advisor-webhook.ops.svc")
LOCAL = ("localhost", "127.0.0.1")  # what the tests' clients connect to
SECRET, CONFIGURATION, CA_CONFIGMAP = "advisor-rayjob-advisor-webhook-certs", "advisor-rayjob-advisor", "ca-of-jobs"
URL = "https://advisor-rayjob-advisor-progress.ops.svc/progress"


def loaded(data: dict[str, bytes]) -> tuple[x509.Certificate, x509.Certificate]:
    """(the CA, the serving certificate) of a Secret's data."""
    return x509.load_pem_x509_certificate(data["ca.crt"]), x509.load_pem_x509_certificate(data["tls.crt"])


def names_of(cert: x509.Certificate) -> set[str]:
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return {str(name.value) for name in san}


def test_an_empty_secret_gets_a_ca_and_a_serving_certificate_it_signed_and_keeps_them():
    data = certificates.renewed({}, NAMES, "advisor-ca", NOW)
    assert data is not None
    ca, leaf = loaded(data)
    leaf.verify_directly_issued_by(ca)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert not leaf.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert names_of(leaf) == set(NAMES) and leaf.not_valid_after_utc - NOW == certificates.SERVING_LIFETIME
    assert b"PRIVATE KEY" in data["tls.key"] and b"PRIVATE KEY" in data["ca.key"]
    assert certificates.renewed(data, NAMES, "advisor-ca", NOW + dt.timedelta(days=30)) is None  # nothing due


@pytest.mark.parametrize(
    ("names", "days"),
    [(NAMES, 61), ((*NAMES, "advisor-rayjob-advisor-progress.ops.svc"), 0), (NAMES[:1], 0)],
    ids=["a third of its life left", "a name more", "a name less"],
)
def test_the_serving_certificate_is_renewed_under_the_same_ca(names, days):
    """Renewed when a third of its life is left or when its names differ; the CA (the API server's and the running
    jobs' trust anchor) stays."""
    data = certificates.renewed({}, NAMES, "advisor-ca", NOW)
    assert data is not None
    later = certificates.renewed(data, names, "advisor-ca", NOW + dt.timedelta(days=days))
    assert later is not None and later["ca.crt"] == data["ca.crt"] and later["ca.key"] == data["ca.key"]
    ca, leaf = loaded(later)
    leaf.verify_directly_issued_by(ca)
    assert names_of(leaf) == set(names) and later["tls.crt"] != data["tls.crt"]


def test_a_ca_near_its_end_or_unusable_data_is_made_anew():
    data = certificates.renewed({}, NAMES, "advisor-ca", NOW)
    assert data is not None
    late = NOW + certificates.CA_LIFETIME - certificates.CA_RENEW_BEFORE
    renewed = certificates.renewed(data, NAMES, "advisor-ca", late)
    assert renewed is not None and renewed["ca.crt"] != data["ca.crt"]
    loaded(renewed)[1].verify_directly_issued_by(loaded(renewed)[0])
    other = certificates.renewed({}, NAMES, "advisor-ca", NOW)
    assert other is not None
    mixed = {**data, "tls.key": other["tls.key"]}  # a key that is not the certificate's
    fixed = certificates.renewed(mixed, NAMES, "advisor-ca", NOW)
    assert fixed is not None and fixed["ca.crt"] == data["ca.crt"] and fixed["tls.crt"] != data["tls.crt"]
    garbage = certificates.renewed({"ca.crt": b"nonsense", "tls.crt": b""}, NAMES, "advisor-ca", NOW)
    assert garbage is not None and loaded(garbage)


def chart_objects() -> list[dict]:
    """What the chart renders in operator mode for the controller to fill: the empty Secret, the webhook
    configuration without caBundle."""
    objects = render({"certificates": {"mode": "operator"}})
    (secret,) = by_kind(objects, "Secret")
    (configuration,) = by_kind(objects, "MutatingWebhookConfiguration")
    assert "data" not in secret and secret["metadata"]["name"] == SECRET
    assert configuration["metadata"]["name"] == CONFIGURATION
    return [secret, configuration]


def secret_data(api: AdvisorEmulator) -> dict[str, bytes]:
    stored = api.get("secrets", "ops", SECRET).get("data") or {}
    return {key: base64.b64decode(value) for key, value in stored.items()}


def ca_bundles(api: AdvisorEmulator) -> list[str | None]:
    hooks = api.get("mutatingwebhookconfigurations", None, CONFIGURATION)["webhooks"]
    return [hook["clientConfig"].get("caBundle") for hook in hooks]


KEPT = {"tls_secret": f"ops/{SECRET}", "tls_server_names": LOCAL, "webhook_configuration": CONFIGURATION}


def test_the_controller_fills_the_secret_and_the_ca_bundle_and_the_webhook_serves_it(tmp_path, monkeypatch):
    """The real controller against the chart's objects: a CA and a certificate in the Secret, the CA in every
    webhook's caBundle; a webhook started from the Secret answers over TLS verified with the caBundle. A serving
    certificate near its end is renewed under the same CA."""
    monkeypatch.setattr(certificates, "CHECK_SECONDS", 0.2)
    with AdvisorEmulator() as api:
        api.create_namespace("ops")
        for obj in chart_objects():
            api.create(obj)
        with running_advisor(api=api, **KEPT):
            data = api.wait_until(lambda: secret_data(api).get("tls.crt") and secret_data(api), 10)
            bundles = api.wait_until(lambda: all(ca_bundles(api)) and ca_bundles(api), 10)
        assert set(bundles) == {base64.b64encode(data["ca.crt"]).decode()}
        files = {name: tmp_path / name for name in ("ca.crt", "tls.crt", "tls.key")}
        for name, path in files.items():  # as the kubelet mounts the Secret (the CA's key is not among them)
            path.write_bytes(data[name])
        bundle = tmp_path / "bundle.pem"
        bundle.write_bytes(base64.b64decode(bundles[0]))
        tls = {"tls_cert_file": str(files["tls.crt"]), "tls_key_file": str(files["tls.key"])}
        with running_advisor("webhook", api=api, **tls) as webhook:
            trusting = Webhook(webhook.config.webhook_port, str(bundle))
            _, response = trusting.admit(make_rayjob())
            assert response["allowed"] is True
        # A serving certificate with less than a third of its life left: a new one, the CA kept.
        ca = certificates.KeyPair.load(data, "ca.crt", "ca.key")
        assert ca is not None
        old_cert, old_key = certificates.issue(ca, LOCAL, ann.now() - dt.timedelta(days=80)).pem()
        api.patch("secrets", "ops", SECRET, {"data": {"tls.crt": base64.b64encode(old_cert).decode(),
                                                       "tls.key": base64.b64encode(old_key).decode()}})  # fmt: skip
        with running_advisor(api=api, **KEPT):
            renewed = api.wait_until(lambda: secret_data(api)["tls.crt"] not in (old_cert, data["tls.crt"]), 10)
        assert renewed
        after = secret_data(api)
        assert after["ca.crt"] == data["ca.crt"] and after["ca.key"] == data["ca.key"]
        loaded(after)[1].verify_directly_issued_by(loaded(after)[0])
        assert set(ca_bundles(api)) == set(bundles)


def test_a_refused_secret_is_one_log_line_and_the_next_check_fills_it(monkeypatch, caplog):
    """An RBAC rule missing (403) or a conflict with another writer (409): a warning without a traceback, and the
    loop goes on (no crash loop); once the API server lets it, the Secret is filled."""
    monkeypatch.setattr(certificates, "CHECK_SECONDS", 0.2)
    with AdvisorEmulator() as api:
        api.create_namespace("ops")
        for obj in chart_objects():
            api.create(obj)
        api.inject_fault("get", "secrets", name=SECRET, status=403, times=2, message="secrets is forbidden")
        api.inject_fault("patch", "secrets", name=SECRET, status=409, message="the object has been modified")
        with running_advisor(api=api, **KEPT) as advisor:
            api.wait_until(lambda: secret_data(api).get("tls.crt"), 10)
            assert advisor.memo.keeper.problem() is None
    refused = [r for r in caplog.records if f"could not handle Secret ops/{SECRET}" in r.getMessage()]
    assert {r.getMessage().split(": ")[-1].split(";")[0] for r in refused} == {
        "HTTP 403 Forbidden",
        "HTTP 409 Conflict",
    }
    assert not any(r.exc_info for r in refused)


def test_the_ca_is_published_where_the_progress_hook_wires_jobs_and_follows_a_new_ca(monkeypatch):
    """The ConfigMap the hook mounts appears in the namespace of a job the progress hook wires (and nowhere else),
    and holds the new CA once the CA changes."""
    monkeypatch.setattr(certificates, "CHECK_SECONDS", 0.2)
    progress = {"hooks": ("progress",), "progress_url": URL, "tls_ca_configmap": CA_CONFIGMAP}
    with AdvisorEmulator() as api:
        api.create_namespace("ops")
        api.create_namespace("ml-team")
        for obj in chart_objects():
            api.create(obj)
        with running_advisor(api=api, objects=[profile_manifest()], **KEPT, **progress):
            rayjob = make_rayjob(annotations={ann.WORKLOAD: "synthetic"})
            api.create(rayjob)
            namespace = rayjob["metadata"].get("namespace", "default")

            def published() -> str | None:
                found = {c["metadata"]["namespace"]: c for c in api.objects("configmaps")}
                return found[namespace]["data"]["ca.crt"] if namespace in found else None

            first = api.wait_until(published, 10)
            assert first == secret_data(api)["ca.crt"].decode()
            assert [c["metadata"]["namespace"] for c in api.objects("configmaps")] == [namespace]
            api.patch("secrets", "ops", SECRET, {"data": {"ca.crt": None, "ca.key": None}})  # a CA lost: a new one
            second = api.wait_until(lambda: published() != first and published(), 10)
            assert second == secret_data(api)["ca.crt"].decode()


def test_a_server_whose_certificate_is_not_there_yet_starts_and_listens_once_it_is(tmp_path, monkeypatch, caplog):
    """A webhook pod starts while the controller has not filled the Secret (mounted empty, optional): no crash,
    one log line, the port closed (readiness false) until the files load."""
    monkeypatch.setattr(serving, "CERT_CHECK_SECONDS", 0.1)
    port, cert, key = free_port(), tmp_path / "tls.crt", tmp_path / "tls.key"
    certificate = serving.Certificate(str(cert), str(key))

    def accepting() -> bool:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        except OSError:
            return False
        return True

    async def ok(_: aiohttp.web.Request) -> aiohttp.web.Response:
        return aiohttp.web.Response(text="ok")

    async def scenario() -> bool:
        route = aiohttp.web.get("/", ok)
        server = serving.Server([route], port=port, limits=serving.Limits(), certificate=certificate)
        await server.start()  # returns at once
        await asyncio.sleep(0.5)
        closed = not await asyncio.to_thread(accepting)
        data = certificates.renewed({}, LOCAL, "test-ca", ann.now())
        assert data is not None
        cert.write_bytes(data["tls.crt"])
        key.write_bytes(data["tls.key"])
        (tmp_path / "ca.crt").write_bytes(data["ca.crt"])
        for _ in range(50):
            if await asyncio.to_thread(accepting):
                break
            await asyncio.sleep(0.1)
        context = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
        async with aiohttp.ClientSession() as session, session.get(f"https://127.0.0.1:{port}/", ssl=context) as got:
            assert await got.text() == "ok"
        await server.stop()
        return closed

    assert asyncio.run(scenario())
    waiting = [r for r in caplog.records if "not listening until the certificate files load" in r.getMessage()]
    assert len(waiting) == 1 and not any(r.exc_info for r in caplog.records)
