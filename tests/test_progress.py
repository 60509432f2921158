"""Progress reports: authenticated by TokenReview (the strict emulator's), authorized by namespace, refining the ETA;
and the Ray Train callback that sends them, in a real Ray Train run."""

from __future__ import annotations

import concurrent.futures
import json
import logging
import pathlib
import sys
import time
import urllib.error
from collections.abc import Iterator

import kubernetes
import pytest
import ray.cloudpickle

from rayjob_advisor import contract as ann
from rayjob_advisor.kube import kubeapi
from rayjob_advisor.kuberay import hooks
from rayjob_advisor.profiling.progress import AdvisorProgress
from rayjob_advisor_testkit.advisor import QUICK_REFITS, RunningAdvisor, running_advisor
from rayjob_advisor_testkit.certificates import make_certificates
from rayjob_advisor_testkit.lifecycle import notes, start
from rayjob_advisor_testkit.profiles import profile_manifest, profiled_rayjob
from rayjob_advisor_testkit.resources import AdvisorEmulator

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # Ray workers cannot import tests/
AUDIENCE = "rayjob-advisor"


def test_token_reviews_are_answered_strictly():
    with AdvisorEmulator() as api:
        client = kubeapi.client(api.url)
        token = api.tokens.issue("ml", "trainer", audiences=[AUDIENCE], pod="train-head-x")
        status = kubeapi.review_token(client, token, [AUDIENCE, "other"])["status"]
        assert status["authenticated"] and status["audiences"] == [AUDIENCE]
        assert status["user"]["username"] == "system:serviceaccount:ml:trainer"
        assert "system:serviceaccounts:ml" in status["user"]["groups"]
        assert status["user"]["extra"]["authentication.kubernetes.io/pod-name"] == ["train-head-x"]
        wrong_audience = kubeapi.review_token(client, token, ["other"])["status"]
        assert not wrong_audience["authenticated"] and "audiences" in wrong_audience["error"]
        assert not kubeapi.review_token(client, token, [])["status"]["authenticated"]  # the API server's audience
        assert kubeapi.review_token(client, api.tokens.issue("ml"), [])["status"]["authenticated"]
        forged = kubeapi.review_token(client, token + "x", [AUDIENCE])["status"]
        assert not forged["authenticated"] and "invalid bearer token" in forged["error"]
        expired = api.tokens.issue("ml", audiences=[AUDIENCE], expires_in=-1)
        assert "expired" in kubeapi.review_token(client, expired, [AUDIENCE])["status"]["error"]
        with pytest.raises(kubernetes.client.ApiException) as empty:
            kubeapi.review_token(client, "", [AUDIENCE])
        assert empty.value.status == 400
        assert not api.objects("tokenreviews")  # reviews are answers, never stored


# The controller's progress endpoint against the emulator.


def job(name: str) -> dict:
    return profiled_rayjob(name, **{ann.DATASET_SIZE: "1000000"})


@pytest.fixture(scope="module")
def advisor() -> Iterator[RunningAdvisor]:
    """A controller with its progress endpoint."""
    with running_advisor(objects=[profile_manifest()], progress=True, **QUICK_REFITS) as running:
        yield running
        assert not [v for v in running.api.violations if v.rejected]


def started(api: AdvisorEmulator, name: str, ago: float = 60) -> dict:
    return start(api, job(name), ago)


def post(advisor: RunningAdvisor, body: object, token: str | None) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    status, _, answer = advisor.progress.post(json.dumps(body).encode(), headers)
    return status, answer.decode()


def test_a_report_from_the_jobs_head_pod_refines_its_eta(advisor):
    api = advisor.api
    stored = started(api, "reported")
    before = notes(api, "reported")[ann.ETA]
    token = api.ray_pod("default", "reported", audience=AUDIENCE)
    report = {"namespace": "default", "name": "reported", "uid": stored["metadata"]["uid"], "done": 95, "total": 100}
    status, text = post(advisor, report, token)
    assert status == 200, text
    answer = json.loads(text)
    after = notes(api, "reported")
    assert after[ann.ETA] == answer["eta"] != before  # 95 % done in a minute: far sooner than predicted
    assert ann.parse_timestamp(answer["eta"]) < ann.parse_timestamp(before)
    assert json.loads(after[ann.PROGRESS])["done"] == 95
    review = api.requests("POST", "tokenreviews")[-1]
    assert review.body["spec"] == {"token": token, "audiences": [AUDIENCE]}


@pytest.mark.parametrize(
    ("who", "report", "status", "words"),
    [
        ("none", {"done": 1, "total": 10}, 401, "no bearer token"),
        ("forged", {"done": 1, "total": 10}, 401, "not accepted"),
        ("api-audience", {"done": 1, "total": 10}, 401, "not accepted"),
        ("other-namespace", {"done": 1, "total": 10}, 403, "may not report"),
        ("job", {"done": 11, "total": 10}, 400, "more than total"),
        ("job", {"done": 1, "total": 10, "extra": 1}, 400, "extra"),
        ("job", {"done": 1, "total": 10, "name": "missing"}, 404, "no RayJob default/missing"),
        ("job", {"done": 1, "total": 10, "uid": "another"}, 409, "another job"),
        ("job", {"done": 1, "total": 1e300}, 400, "less than or equal to 1000000000000"),
        ("frontend-pod", {"done": 99, "total": 100}, 403, "is not a pod of RayJob default/"),
        ("frontend-account", {"done": 99, "total": 100}, 403, "is not RayJob default/"),
        ("head-account", {"done": 99, "total": 100}, 403, "reports only with RayJob default/"),
    ],
)
def test_reports_are_refused_with_one_line_saying_why(advisor, who, report, status, words):
    """Among them, issue 21's forged ETA: another pod of the job's namespace (a web frontend's), or its service
    account's token bound to no pod, may not move the job's ETA; the head pod's account without a pod, only with
    the job's uid."""
    api = advisor.api
    name = f"refused-{status}-{len(api.objects('rayjobs'))}"
    started(api, name)
    api.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"{name}-web", "namespace": "default"}})
    tokens = {
        "none": None,
        "forged": "emulated.forged",
        "api-audience": api.tokens.issue("default"),
        "other-namespace": api.tokens.issue("kube-system", audiences=[AUDIENCE]),
        "job": api.ray_pod("default", name, audience=AUDIENCE),
        "frontend-pod": api.tokens.issue("default", "web", audiences=[AUDIENCE], pod=f"{name}-web"),
        "frontend-account": api.tokens.issue("default", "web", audiences=[AUDIENCE]),
        "head-account": api.tokens.issue("default", audiences=[AUDIENCE]),
    }
    body = {"namespace": "default", "name": name, **report}
    answer, text = post(advisor, body, tokens[who])
    assert (answer, words in text) == (status, True), text
    assert ann.PROGRESS not in notes(api, name)


def test_a_job_not_running_cannot_be_reported_on(advisor):
    api = advisor.api
    api.create(job("waiting"))
    api.wait_until(lambda: notes(api, "waiting").get(ann.PREDICTION), 60)
    token = api.ray_pod("default", "waiting", audience=AUDIENCE)
    status, text = post(advisor, {"namespace": "default", "name": "waiting", "done": 1, "total": 2}, token)
    assert status == 409 and "not running" in text


# Issue 21: what any pod of the cluster may send costs little, and never a 5xx.


MALFORMED = [
    b"",
    b"\xff\xfe not utf-8",
    b"[]",
    b"null",
    b'"report"',
    b'{"namespace": "default"}',
    b'{"namespace": "default", "name": "%s", "done": "1", "total": {}}',
    b'{"namespace": "default", "name": "%s", "done": -1, "total": 10}',
    b'{"namespace": "default", "name": "%s", "done": NaN, "total": 10}',
    b'{"namespace": "default", "name": "%s", "done": 1, "total": Infinity}',
    b'{"namespace": "default", "name": "%s", "done": 1, "total": 1e999}',
    b'{"namespace": "Default/../x", "name": "%s", "done": 1, "total": 10}',
    b'{"namespace": "default", "name": "%s/status", "done": 1, "total": 10}',
    b'{"namespace": "default", "name": "%s", "uid": "a/b", "done": 1, "total": 10}',
    b'{"namespace": "default", "name": "%s", "done": 1, "total": 10, "unit": "hours"}',
    b'{"namespace": "default", "name": "%s", "done": 0.5, "total": 1e-300}',
    b'{"namespace": "default", "name": "%s", "done": 1e-300, "total": 1000000000000}',
]


def test_malformed_reports_get_a_4xx_never_a_5xx(advisor):
    """Among them a trickle of work (1e-300 steps done of a trillion), which projected the ETA beyond year 9999."""
    api = advisor.api
    started(api, "malformed")
    token = api.ray_pod("default", "malformed", audience=AUDIENCE)
    answers = []
    for body in MALFORMED:
        raw = body.replace(b"%s", b"malformed")
        status, _, text = advisor.progress.post(raw, {"Authorization": f"Bearer {token}"}, source="127.0.0.4")
        answers.append((raw, status, text.decode(errors="replace")))
    assert [a for a in answers if a[1] >= 500] == []
    assert [(raw, status, text) for raw, status, text in answers[:-1] if status != 400] == []
    assert answers[-1][1] == 200  # bounded: an ETA at most ten years ahead


def test_repeated_reports_of_a_pod_are_answered_from_the_last_eta_without_an_api_call(advisor):
    api = advisor.api
    stored = started(api, "chatty")
    token = api.ray_pod("default", "chatty", audience=AUDIENCE)
    report = {"namespace": "default", "name": "chatty", "uid": stored["metadata"]["uid"], "total": 100}
    patches = len(api.requests("PATCH", "rayjobs", name="chatty"))
    first = [post(advisor, {**report, "done": done}, token) for done in (10, 20, 30)]
    assert [status for status, _ in first] == [200] * 3 and first[0][1] == first[1][1] == first[2][1]
    assert json.loads(notes(api, "chatty")[ann.PROGRESS])["done"] == 10
    assert post(advisor, {**report, "done": 100}, token)[0] == 200  # the end is always recorded
    assert json.loads(notes(api, "chatty")[ann.PROGRESS])["done"] == 100
    assert len(api.requests("PATCH", "rayjobs", name="chatty")) == patches + 2


def test_a_flood_of_bogus_tokens_costs_at_most_one_review_each_and_a_report_goes_through(advisor):
    """Issue 21's TokenReview flood: 32 clients with bogus tokens, from another address, 4 requests each (and one
    token sent 20 times at once); a report from the job's head pod, from its own address, still succeeds. The
    flood's connections beyond its address's burst are reset before TLS (``reports.CONNECTION_BURST``)."""
    api = advisor.api
    stored = started(api, "flooded")
    token = api.ray_pod("default", "flooded", audience=AUDIENCE)
    reviews = len(api.requests("POST", "tokenreviews"))
    body = json.dumps({"namespace": "default", "name": "flooded", "done": 1, "total": 10}).encode()
    bogus = [f"emulated.bogus-{n}" for n in range(32)]

    def attack(token: str, source: str) -> int | str:
        try:
            return advisor.progress.post(body, {"Authorization": f"Bearer {token}"}, source=source)[0]
        except urllib.error.URLError:
            return "reset"

    with concurrent.futures.ThreadPoolExecutor(32) as pool:
        flood = [pool.submit(attack, bogus[n % 32], "127.0.0.2") for n in range(128)]
        same = [pool.submit(attack, "emulated.one-token", "127.0.0.3") for _ in range(20)]
        report = {"namespace": "default", "name": "flooded", "uid": stored["metadata"]["uid"], "done": 5, "total": 10}
        status, text = post(advisor, report, token)
        statuses = [future.result() for future in flood + same]
    assert status == 200, text
    assert set(statuses) <= {401, 429, "reset"} and 429 in statuses  # refused, throttled per address before a review
    sent = len(api.requests("POST", "tokenreviews")) - reviews
    assert sent <= len(bogus) + 2, sent  # at most one per distinct token (the job's own included)
    answers = [advisor.progress.post(body, {"Authorization": "Bearer x"}, source="127.0.0.5") for _ in range(80)]
    throttled = [text for status, _, text in answers if status == 429]
    assert throttled and b"from this address; try again in 1 s" in throttled[0]


def test_a_throttled_api_server_is_asked_once_and_the_report_refused_at_once(advisor):
    api = advisor.api
    started(api, "throttled")
    token = api.ray_pod("default", "throttled", audience=AUDIENCE)
    reviews = len(api.requests("POST", "tokenreviews"))
    api.inject_fault("POST", "tokenreviews", status=429, times=1)
    status, text = post(advisor, {"namespace": "default", "name": "throttled", "done": 1, "total": 10}, token)
    assert status == 503 and "ApiException" in text
    assert len(api.requests("POST", "tokenreviews")) == reviews + 1  # no retry: the reporter sends its next report


def injected(advisor: RunningAdvisor, stored: dict, monkeypatch: pytest.MonkeyPatch, folder: pathlib.Path) -> None:
    """The environment the progress hook gives ``stored``'s head pod, pointing at the test's endpoint, set here; the
    CA's ConfigMap as the kubelet mounts it, in ``folder``."""
    progress = hooks.Progress(url=advisor.progress.url, audience=AUDIENCE, ca_configmap="advisor-ca")
    patch = hooks.patch(stored, frozenset({"progress"}), 60, progress)
    (ray, *_) = patch["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"]
    mounted = folder / ann.PROGRESS_CA_PATH
    mounted.write_text(pathlib.Path(advisor.ca or "").read_text())
    for variable in ray["env"]:
        name, value = variable["name"], variable.get("value")
        if name == ann.PROGRESS_CA_ENV:  # the mount's path, here
            assert value == f"{ann.PROGRESS_CA_DIR}/{ann.PROGRESS_CA_PATH}"
            value = str(mounted)
        if name.startswith("RAYJOB_ADVISOR_"):
            monkeypatch.setenv(name, value)


def token_file(api: AdvisorEmulator, folder: pathlib.Path, rayjob: str) -> str:
    """The projected token of ``rayjob``'s head pod for the advisor, as the kubelet writes it."""
    path = folder / "token"
    path.write_text(api.ray_pod("default", rayjob, audience=AUDIENCE))
    return str(path)


def test_the_callback_verifies_the_endpoint_with_the_injected_ca(advisor, tmp_path, monkeypatch, caplog):
    api = advisor.api
    stored = started(api, "pem")
    injected(advisor, stored, monkeypatch, tmp_path)
    callback = AdvisorProgress(total=10, namespace="default", token_file=token_file(api, tmp_path, "pem"), interval=0)
    assert (callback.rayjob, callback.ca_pem) == ("pem", None) and callback.ca_file == str(tmp_path / "ca.crt")
    callback.after_report(None, [{}], None)
    assert json.loads(notes(api, "pem")[ann.PROGRESS])["done"] == 1
    other_ca, _, _ = make_certificates(tmp_path)  # another CA: the endpoint's certificate does not verify
    monkeypatch.setenv("RAYJOB_ADVISOR_PROGRESS_CA", str(other_ca))
    stranger = AdvisorProgress(total=10, namespace="default", token_file=token_file(api, tmp_path, "pem"), interval=0)
    with caplog.at_level(logging.WARNING):
        stranger.after_report(None, [{}], None)
        stranger.after_report(None, [{}], None)
    assert "CERTIFICATE_VERIFY_FAILED" in caplog.text and json.loads(notes(api, "pem")[ann.PROGRESS])["done"] == 1


@pytest.mark.parametrize(
    ("cluster", "rayjob"),
    [("train-x7k2p", "train"), ("my-train-job-x7k2p", "my-train-job"), ("train", None), ("train-toolong", None)],
)
def test_a_job_admitted_without_a_name_is_named_from_its_clusters(monkeypatch, cluster, rayjob):
    monkeypatch.delenv("RAYJOB_ADVISOR_RAYJOB", raising=False)
    monkeypatch.setenv("RAYJOB_ADVISOR_RAY_CLUSTER", cluster)  # KubeRay's <rayjob>-<5 random characters>
    assert AdvisorProgress(total=1).rayjob == rayjob
    assert AdvisorProgress(total=1, rayjob="given").rayjob == "given"


@pytest.mark.ray
def test_the_ray_train_callback_moves_a_real_runs_eta(advisor, tmp_path, monkeypatch):
    """A real Ray Train run reports 4 epochs through ``AdvisorProgress``, configured by the environment the
    progress hook injects; the job's ETA moves with them."""
    from ray.train import RunConfig, ScalingConfig
    from ray.train.v2.api.data_parallel_trainer import DataParallelTrainer

    from rayjob_advisor.profiling.harness import RaySession

    api = advisor.api
    stored = started(api, "real", ago=5)
    predicted = notes(api, "real")[ann.ETA]
    injected(advisor, stored, monkeypatch, tmp_path)
    callback = AdvisorProgress(
        total=4,
        unit="epochs",
        namespace="default",  # a pod's own, from its service-account mount
        uid=stored["metadata"]["uid"],
        token_file=token_file(api, tmp_path, "real"),  # the injected mount's path, here
        interval=0,
    )

    def train(config: dict) -> None:
        import ray.train

        for epoch in range(4):
            time.sleep(0.2)
            ray.train.report({"epoch": epoch})

    trainer = DataParallelTrainer(
        train,
        scaling_config=ScalingConfig(num_workers=1),
        run_config=RunConfig(storage_path=str(tmp_path / "ray"), callbacks=[callback]),
    )
    with RaySession() as session:
        session.start()
        trainer.fit()
    final = notes(api, "real")  # the last report was sent before fit() returned
    assert json.loads(final[ann.PROGRESS])["done"] == 4
    assert final[ann.ETA] != predicted
    assert ann.parse_timestamp(final[ann.ETA]) < ann.parse_timestamp(predicted)  # done long before the prediction
    assert json.loads(final[ann.PROGRESS])["unit"] == "epochs"
