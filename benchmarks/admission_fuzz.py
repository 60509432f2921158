"""A property-based fuzz of the admission webhook: every answer is a 4xx or an allowed, valid patch.

Requests (hypothesis) are AdmissionReviews of random RayJobs under every
operation, with annotations near Kubernetes' 256 KiB and bodies past the
API server's 3 MiB; the same with a wrong type or a missing field at a
level of the envelope or of the RayJob's spec; and bodies that are no JSON
object at all. Each goes over HTTPS to the real webhook server (the test
kit's ``running_advisor``). A problem is: an HTTP 5xx, a 4xx for a
well-formed review or a 200 for a malformed one, a denial, a patch that
does not apply, adds a violation of the KubeRay CRD, takes the annotations
past 256 KiB or changes the spec of anything but a CREATE.
``tests/test_webhook.py`` runs a short form.

    .venv/bin/python -m benchmarks.admission_fuzz [--examples 1000]
"""

from __future__ import annotations

import argparse
import base64
import collections
import dataclasses
import json
import re
import time
from typing import Any

import jsonpatch
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from rayjob_advisor import contract as ann
from rayjob_advisor.kube.admission import ANNOTATIONS_LIMIT, MAX_REQUEST_BYTES, annotations_size
from rayjob_advisor_testkit.admission import Webhook
from rayjob_advisor_testkit.advisor import running_advisor
from rayjob_advisor_testkit.profiles import WORKLOAD, profile_manifest
from rayjob_advisor_testkit.rayjobs import make_rayjob, rayjob_violations, worker_group

GARBAGE = st.one_of(st.text(max_size=12), st.integers(-5, 10**6).map(str))
VALID = {
    ann.WORKLOAD: st.just(WORKLOAD),
    ann.DEADLINE: st.sampled_from(["15s", "40s", "2h", "2026-12-02T18:00:00Z"]),
    ann.MODE: st.sampled_from(["off", "recommend", "enforce"]),
    ann.DATASET_SIZE: st.integers(1000, 50000).map(str),
    ann.EPOCHS: st.integers(1, 3).map(str),
    ann.BATCH_SIZE: st.sampled_from(["32", "64", "128"]),
    ann.BATCH_SIZE_PER_WORKER: st.sampled_from(["16", "32"]),
    ann.BATCH_SCALING: st.sampled_from(["per-worker", "global"]),
    ann.PLACEMENT: st.sampled_from(["packed", "spread", "one-per-node"]),
    ann.CONFIDENCE: st.sampled_from(["0.5", "0.9", "0.99"]),
    ann.SCALE_GROUP: st.sampled_from(["g0", "g1", "nope"]),
    ann.WORKERS_ENV: st.just("NUM_WORKERS"),
    ann.WORKERS_ARG: st.just("--num-workers"),
    ann.WORKERS_FROM: st.just("cluster"),
    ann.ACCELERATOR: st.sampled_from(["a100", "NVIDIA-A100-SXM4-80GB", "nvidia-tesla-t4"]),
}


@st.composite
def random_rayjobs(draw: st.DrawFn) -> dict[str, Any]:
    """Valid RayJobs: 0-3 worker groups of any bounds, mostly valid advisor annotations, one in ten garbage."""
    groups = []
    for index in range(draw(st.integers(0, 3))):
        resources = draw(st.sampled_from([None, {"limits": {"nvidia.com/gpu": "1"}}, {"requests": {"cpu": "500m"}}]))
        group = worker_group(
            f"g{index}", resources=resources, replicas=draw(st.integers(0, 10)),
            minReplicas=draw(st.integers(0, 4)), maxReplicas=draw(st.integers(0, 8)),
        )  # fmt: skip
        if draw(st.booleans()):
            group["numOfHosts"] = draw(st.integers(1, 4))
        groups.append(group)
    notes = {
        key: draw(st.one_of(VALID[key], GARBAGE) if draw(st.integers(0, 9)) == 0 else VALID[key])
        for key in draw(st.sets(st.sampled_from(ann.INPUT_KEYS)))
        | ({ann.DATASET_SIZE, ann.DEADLINE, ann.MODE} if draw(st.booleans()) else set())
    }  # half the jobs plan a deadline
    notes.setdefault(ann.WORKLOAD, WORKLOAD)
    rayjob = make_rayjob(annotations=notes, groups=groups)
    if groups and draw(st.booleans()):  # the Ray Train worker count, set the way KubeRay's samples set it
        rayjob["spec"]["runtimeEnvYAML"] = f"env_vars:\n  NUM_WORKERS: '{draw(st.integers(0, 12))}'\n"
    return rayjob


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)
TYPES: dict[str, Any] = {"object": dict, "string": str, "bool": bool, "list": list}

# Where the API server's AdmissionReview has a fixed type: a wrong one there is a malformed envelope (4xx).
ENVELOPE = {
    (): "object", ("apiVersion",): "string", ("kind",): "string", ("request",): "object",
    ("request", "uid"): "string", ("request", "kind"): "object", ("request", "kind", "kind"): "string",
    ("request", "resource"): "object", ("request", "resource", "group"): "string",
    ("request", "operation"): "string", ("request", "userInfo"): "object", ("request", "userInfo", "groups"): "list",
    ("request", "object"): "object", ("request", "object", "apiVersion"): "string",
    ("request", "object", "metadata"): "object", ("request", "object", "metadata", "namespace"): "string",
    ("request", "object", "metadata", "annotations"): "object", ("request", "dryRun"): "bool",
}  # fmt: skip
WRONG_STRINGS = {
    ("apiVersion",): "admission.k8s.io/v2", ("kind",): "Pod", ("request", "uid"): "",
    ("request", "kind", "kind"): "Pod", ("request", "operation"): "PATCH", ("request", "object", "apiVersion"): "v1",
}  # fmt: skip
# Places in a RayJob the API server checks against the CRD only after mutating admission: the review is well-formed.
SPEC = [
    ("spec",), ("spec", "rayClusterSpec"), ("spec", "rayClusterSpec", "workerGroupSpecs"),
    ("spec", "rayClusterSpec", "workerGroupSpecs", 0), ("spec", "rayClusterSpec", "workerGroupSpecs", 0, "replicas"),
    ("spec", "rayClusterSpec", "workerGroupSpecs", 0, "minReplicas"),
    ("spec", "rayClusterSpec", "workerGroupSpecs", 0, "numOfHosts"),
    ("spec", "rayClusterSpec", "workerGroupSpecs", 0, "template", "spec", "containers", 0, "resources"),
    ("spec", "rayClusterSpec", "headGroupSpec"), ("spec", "rayClusterSpec", "enableInTreeAutoscaling"),
    ("spec", "suspend"), ("spec", "clusterSelector"),
]  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Case:
    """One request body, and what the webhook should make of it."""

    kind: str
    body: bytes
    well_formed: bool
    operation: str = "CREATE"
    rayjob: dict[str, Any] | None = None  # the object the patch applies to


def _set(document: Any, path: tuple[Any, ...], value: Any) -> Any:
    """``document`` with ``value`` at ``path`` (a missing part of the path: unchanged); ``...``: delete it."""
    if not path:
        return value
    *parents, last = path
    target = document
    for key in parents:
        try:
            target = target[key]
        except (KeyError, IndexError, TypeError):
            return document
    if value is ... and isinstance(target, dict):
        target.pop(last, None)
    elif isinstance(target, dict) or (isinstance(target, list) and isinstance(last, int) and last < len(target)):
        target[last] = value
    return document


def _body(envelope: Any) -> bytes:
    return json.dumps(envelope).encode()


@st.composite
def well_formed(draw: st.DrawFn) -> Case:
    """A review the API server could send: any operation, odd annotations, spec of any type, up to 3 MiB.

    (An UPDATE carries the RayJob twice: the biggest ones are over 3 MiB, and due a 413.)
    """
    rayjob = draw(random_rayjobs())
    operation = draw(st.sampled_from(["CREATE", "CREATE", "UPDATE", "DELETE", "CONNECT"]))
    notes = rayjob["metadata"]["annotations"]
    kind = draw(st.sampled_from(["valid", "spec", "annotations", "strings", "size"]))
    if kind == "spec":  # a wrong type where KubeRay's CRD has a fixed one
        _set(rayjob, draw(st.sampled_from(SPEC)), draw(JSON))
    elif kind == "annotations":  # the user's own annotations, from well under to over 256 KiB with ours
        room = ANNOTATIONS_LIMIT - annotations_size(notes) - len("example.com/blob")
        notes["example.com/blob"] = "x" * max(0, room - draw(st.sampled_from([-10, 0, 100, 1000, 3000, 10**5])))
    elif kind == "strings":  # any text in an advisor annotation: long, multi-line, non-ASCII
        value = draw(st.text(min_size=1, max_size=20)) * draw(st.sampled_from([1, 100, 5000]))
        notes[draw(st.sampled_from(ann.INPUT_KEYS))] = value
    elif kind == "size":  # the API server takes up to 3 MiB: bigger never comes, smaller must be read
        rayjob["spec"]["entrypoint"] = "x" * draw(st.sampled_from([2**20, 2 * 2**20, MAX_REQUEST_BYTES - 2**16]))
    body = _body(Webhook.envelope(rayjob, operation, dry_run=draw(st.booleans())))
    return Case(kind, body, well_formed=len(body) <= MAX_REQUEST_BYTES, operation=operation, rayjob=rayjob)


@st.composite
def malformed(draw: st.DrawFn) -> Case:
    """No AdmissionReview an API server sends: a wrong type or value, a missing field, not JSON, too big."""
    envelope = Webhook.envelope(draw(random_rayjobs()))
    kind = draw(st.sampled_from(["type", "value", "missing", "annotation", "bytes", "too-big"]))
    if kind == "type":
        path, expected = draw(st.sampled_from(sorted(ENVELOPE.items())))
        wrong = draw(
            JSON.filter(lambda v: not isinstance(v, TYPES[expected]) and (v is not None or path[-1:] != ("dryRun",)))
        )
        return Case(kind, _body(_set(envelope, path, wrong)), well_formed=False)
    if kind == "value":
        path, value = draw(st.sampled_from(sorted(WRONG_STRINGS.items())))
        return Case(kind, _body(_set(envelope, path, value)), well_formed=False)
    if kind == "missing":
        path = draw(
            st.sampled_from(
                sorted(
                    p
                    for p in ENVELOPE
                    if p and p[-1] not in ("dryRun", "metadata", "namespace", "annotations", "groups")
                )
            )
        )
        return Case(kind, _body(_set(envelope, path, ...)), well_formed=False)
    if kind == "annotation":  # the API server's ObjectMeta has string values only
        value = draw(JSON.filter(lambda v: not isinstance(v, str)))
        envelope["request"]["object"]["metadata"]["annotations"][draw(st.sampled_from(ann.INPUT_KEYS))] = value
        return Case(kind, _body(envelope), well_formed=False)
    if kind == "bytes":
        body = draw(st.one_of(st.binary(max_size=64), st.text(max_size=64).map(str.encode), JSON.map(_body)))
        return Case(kind, body, well_formed=False)
    envelope["request"]["object"]["spec"]["entrypoint"] = "x" * (MAX_REQUEST_BYTES + draw(st.integers(1, 2**16)))
    return Case(kind, _body(envelope), well_formed=False)


def cases() -> st.SearchStrategy[Case]:
    return st.one_of(well_formed(), malformed())


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What the webhook answered to one case, and what is wrong with it."""

    status: int
    unexpected: str | None = None  # a 5xx, or a status the case should not get
    denied: bool = False
    invalid: tuple[str, ...] = ()  # why the patch is one the API server would reject or should never get
    warnings: tuple[str, ...] = ()  # their kinds

    @property
    def problems(self) -> list[str]:
        return ([self.unexpected] if self.unexpected else []) + ["denied"] * self.denied + list(self.invalid)


WARNING_KINDS = [
    ("recommended", r"recommends \d+ replicas"),
    ("resized", r"set .* replicas \d+ -> \d+"),
    ("too-many-annotations", r"the advisor's annotations would take metadata.annotations"),
    ("profile-not-ready", r"profile .* is being fitted"),
    ("internal-error", r"could not (advise|answer): \w+"),
]


def warning_kind(text: str) -> str:
    """``recommended``, ``resized``, ..., ``internal-error: TypeError``; any other: ``cannot-predict``."""
    text = text.removeprefix("rayjob-advisor: ")
    for kind, pattern in WARNING_KINDS:
        if found := re.match(pattern, text):
            return kind if kind != "internal-error" else f"{kind}: {found.group().split(': ')[1]}"
    return "cannot-predict"


def exchange(webhook: Webhook, case: Case) -> Outcome:
    """Post ``case`` and check the answer."""
    status, reason, body = webhook.post(case.body)
    expected = "200" if case.well_formed else "4xx"
    if (status == 200) != case.well_formed or not (status == 200 or 400 <= status < 500):
        return Outcome(status, unexpected=f"HTTP {status} {reason[:100]} where {expected} was due")
    if not case.well_formed:
        return Outcome(status)
    response = json.loads(body)["response"]
    kinds = tuple(warning_kind(text) for text in response.get("warnings") or ())
    return Outcome(
        status, denied=not response["allowed"], invalid=tuple(_patch_problems(case, response)), warnings=kinds
    )


def _patch_problems(case: Case, response: dict[str, Any]) -> list[str]:
    if "patch" not in response:
        return []
    if case.operation == "DELETE" or case.rayjob is None:
        return [f"a patch on {case.operation}"]
    before = case.rayjob
    try:
        after = jsonpatch.apply_patch(before, json.loads(base64.b64decode(response["patch"])))
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
        return [f"the patch does not apply: {exc}"]
    problems = [f"adds {v}" for v in sorted(set(rayjob_violations(after)) - set(rayjob_violations(before)))]
    size_before, size_after = (annotations_size(obj["metadata"].get("annotations") or {}) for obj in (before, after))
    if size_after > max(ANNOTATIONS_LIMIT, size_before):
        problems.append(f"annotations of {size_after} bytes")
    if case.operation != "CREATE" and after.get("spec") != before.get("spec"):
        problems.append(f"the spec changed on {case.operation}")
    return problems


def fuzzing_webhook() -> Any:
    """The webhook role on the emulator with a fitted profile of ``WORKLOAD``, as a context manager."""
    return running_advisor("webhook", objects=[profile_manifest()], shipped_profiles=False, refit_interval_seconds=0.1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=1000)
    args = parser.parse_args()
    counts: collections.Counter[str] = collections.Counter()
    warnings: collections.Counter[str] = collections.Counter()
    problems: collections.Counter[str] = collections.Counter()
    with fuzzing_webhook() as advisor:
        advisor.wait_for_model(WORKLOAD)

        @settings(
            max_examples=args.examples, deadline=None, database=None, phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        )  # fmt: skip
        @given(case=cases())
        def fuzz(case: Case) -> None:
            outcome = exchange(advisor.webhook, case)
            counts["requests"] += 1
            counts[f"{'well-formed' if case.well_formed else 'malformed'} {case.kind}"] += 1
            counts[f"HTTP {outcome.status // 100}xx"] += 1
            counts[f"HTTP {outcome.status}"] += 1
            counts["unexpected status"] += outcome.unexpected is not None
            counts["denials"] += outcome.denied
            counts["invalid patches"] += bool(outcome.invalid)
            warnings.update(outcome.warnings)
            problems.update(outcome.problems)

        started = time.perf_counter()
        fuzz()
    print(f"{counts['requests']} requests in {time.perf_counter() - started:.0f}s")
    for key in ("HTTP 2xx", "HTTP 4xx", "HTTP 5xx", "unexpected status", "denials", "invalid patches"):
        print(f"  {key:<16} {counts[key]}")
    print(
        "  by status: " + ", ".join(f"{k[5:]}: {n}" for k, n in sorted(counts.items()) if re.fullmatch(r"HTTP \d+", k))
    )
    print("cases:")
    for key, n in sorted(counts.items()):
        if key.startswith(("well-formed", "malformed")):
            print(f"  {key:<28} {n}")
    print("warnings by kind:")
    for key, n in warnings.most_common():
        print(f"  {key:<36} {n}")
    for key, n in problems.most_common(20):
        print(f"PROBLEM x{n}: {key[:300]}")


if __name__ == "__main__":
    main()
