"""The annotation contract of DESIGN §3: parse what users set, render what we write.

Every user annotation is parsed once, at the boundary, into the frozen
``AdvisorInputs``; its pydantic error text is what users see in the
``error`` annotation, the Warning Event or the CLI message.

The batch rule: a job gives at most one of ``batch-size`` (the global batch,
summed over its Ray Train workers) and ``batch-size-per-worker``. When the
planner or the what-if table changes the worker count, the *per-worker*
batch stays fixed (the global batch grows with the workers), as almost every
Ray Train script does — unless the job gave ``batch-size`` and
``batch-scaling: global``, which keeps the global batch fixed instead.
Without either, the model assumes the profile's typical per-worker batch
and says so under ``assumed``.

``placement`` (``packed``, ``spread``, ``one-per-node``) says how the
scheduler lays the workers on nodes; it overrides what the worker group's
pod template implies (see ``kuberay.scheduling.placement_hint``).

Values out of any sensible range (a trillion samples, a million epochs, a
deadline more than a year away) are input errors, not plans.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal, NamedTuple

import durationpy
import pydantic

from rayjob_advisor.errors import AnnotationError

API_GROUP = "rayjob-advisor.io"  # of the RuntimeProfile CRD; the prefix of every key of ours, and of kopf's state
PREFIX = API_GROUP + "/"

# Keys set by users.
WORKLOAD = PREFIX + "workload"
DEADLINE = PREFIX + "deadline"
MODE = PREFIX + "mode"
DATASET_SIZE = PREFIX + "dataset-size"
EPOCHS = PREFIX + "epochs"
BATCH_SIZE = PREFIX + "batch-size"  # global: summed over the Ray Train workers
BATCH_SIZE_PER_WORKER = PREFIX + "batch-size-per-worker"
BATCH_SCALING = PREFIX + "batch-scaling"  # per-worker (default) | global: which batch a resize keeps
PLACEMENT = PREFIX + "placement"  # packed | spread | one-per-node
CONFIDENCE = PREFIX + "confidence"
SCALE_GROUP = PREFIX + "scale-group"
RELEASE = PREFIX + "release"  # "true" on a suspended RayJob: we unsuspend it once planned
# Where the job sets its Ray Train worker count: an env var name, an entrypoint flag, or "cluster".
WORKERS_ENV = PREFIX + "workers-env"
WORKERS_ARG = PREFIX + "workers-arg"
WORKERS_FROM = PREFIX + "workers-from"
ACCELERATOR = PREFIX + "accelerator"  # when the worker group's nodeSelector / node affinity does not say it

# Kueue's admission gates: a comma-separated list of controllers a job waits for.
KUEUE_GATES = "kueue.x-k8s.io/admission-gated-by"
PLANNER_GATE = PREFIX + "planner"

# Keys written by the advisor.
PREDICTED_RUNTIME = PREFIX + "predicted-runtime"
PREDICTED_RUNTIME_SECONDS = PREFIX + "predicted-runtime-seconds"
PREDICTION = PREFIX + "prediction"
RECOMMENDATION = PREFIX + "recommendation"
ORIGINAL_REPLICAS = PREFIX + "original-replicas"
ACTUAL_RUNTIME_SECONDS = PREFIX + "actual-runtime-seconds"
PREDICTION_ERROR = PREFIX + "prediction-error"
ERROR = PREFIX + "error"
# Once the job runs: its expected end at the median and at the upper bound (RFC 3339), refined by progress reports;
# the last report (compact JSON); the Warning Events already posted (comma-separated reasons, posted once each).
ETA = PREFIX + "eta"
ETA_UPPER = PREFIX + "eta-upper"
PROGRESS = PREFIX + "progress"
ALERTS = PREFIX + "alerts"

# Hooks other schedulers read, written at admission when enabled (config ``hooks`` or a namespace label
# ``rayjob-advisor.io/hook-<name>: "true"|"false"``).
HOOK_LABEL_PREFIX = PREFIX + "hook-"
KUEUE_MAX_RUN_DURATION = "provreq.kueue.x-k8s.io/maxRunDurationSeconds"  # a ProvisioningRequest parameter
KARPENTER_DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"  # on a pod: "true", or a duration from the pod's start

# The progress reporter's settings in the head pod: what ``profiling.progress.AdvisorProgress`` reads and the
# ``progress`` hook injects (a projected token mounted in PROGRESS_TOKEN_DIR, the endpoint, the job, the CA).
PROGRESS_TOKEN_DIR = "/var/run/secrets/rayjob-advisor"
PROGRESS_TOKEN_PATH = "token"  # the file in PROGRESS_TOKEN_DIR
PROGRESS_URL_ENV = "RAYJOB_ADVISOR_PROGRESS_URL"
PROGRESS_RAYJOB_ENV = "RAYJOB_ADVISOR_RAYJOB"  # the RayJob's name
PROGRESS_RAY_CLUSTER_ENV = "RAYJOB_ADVISOR_RAY_CLUSTER"  # else its RayCluster's: ``<rayjob>-<5 random characters>``
PROGRESS_NAMESPACE_ENV = "RAYJOB_ADVISOR_NAMESPACE"
PROGRESS_CA_ENV = "RAYJOB_ADVISOR_PROGRESS_CA"  # a file with the CA of the endpoint's certificate
PROGRESS_CA_PEM_ENV = "RAYJOB_ADVISOR_PROGRESS_CA_PEM"  # the CA itself (PEM)
RAY_CLUSTER_LABEL = "ray.io/cluster"  # KubeRay's label on every Ray pod: its RayCluster's name

# Labels written by the advisor, short mirrors of its annotations for `kubectl get rayjobs -L ...`:
# ``predicted``: the median runtime (``predicted-runtime``); ``deadline-status``, a DeadlineStatus:
# ``none`` (no deadline), before the end ``on-track``/``at-risk`` (the job at the size it will run at ends
# by the deadline at the upper bound, or not), at the end ``met``/``missed``/``failed`` (DeadlineOutcome).
PREDICTED = PREFIX + "predicted"
DEADLINE_STATUS = PREFIX + "deadline-status"
LABEL_KEYS = frozenset({PREDICTED, DEADLINE_STATUS})
DeadlineStatus = Literal["none", "on-track", "at-risk", "met", "missed", "failed"]

_INPUT_FIELDS = {
    WORKLOAD: "workload",
    DEADLINE: "deadline",
    MODE: "mode",
    DATASET_SIZE: "dataset_size",
    EPOCHS: "epochs",
    BATCH_SIZE: "batch_size",
    BATCH_SIZE_PER_WORKER: "batch_size_per_worker",
    BATCH_SCALING: "batch_scaling",
    PLACEMENT: "placement",
    CONFIDENCE: "confidence",
    SCALE_GROUP: "scale_group",
    WORKERS_ENV: "workers_env",
    WORKERS_ARG: "workers_arg",
    WORKERS_FROM: "workers_from",
    ACCELERATOR: "accelerator",
}
_FIELD_KEYS = {field: key for key, field in _INPUT_FIELDS.items()}
INPUT_KEYS: tuple[str, ...] = tuple(_INPUT_FIELDS)
_ASKING = frozenset({*INPUT_KEYS, RELEASE})  # the annotations that ask for the advisor


class Deadline(pydantic.BaseModel):
    """An absolute time, or a duration counted from the RayJob's creation."""

    model_config = pydantic.ConfigDict(frozen=True)

    at: dt.datetime | None = None
    after: dt.timedelta | None = None

    def resolve(self, created: dt.datetime) -> dt.datetime:
        """The absolute deadline of a RayJob created at ``created``."""
        return self.at if self.at is not None else created + self.after  # type: ignore[operator]


def now() -> dt.datetime:
    """The advisor's clock: UTC, whole seconds, as the times it writes (``format_timestamp``)."""
    return dt.datetime.now(dt.UTC).replace(microsecond=0)


def parse_timestamp(text: str) -> dt.datetime:
    """An RFC 3339 time as Kubernetes writes it (``Z`` or an offset)."""
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))


_GO_DURATION = re.compile(r"[-+]?(0|((\d+(\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h))+)")


def parse_duration(text: str) -> dt.timedelta | None:
    """A Go duration (``time.ParseDuration`` syntax: ``90m``, ``1h30m``, ``1.5h``), else None.

    Kubernetes users write Go durations everywhere, so deadlines take the same
    syntax. durationpy also takes ``d``, ``w`` and ``y`` units and characters
    between the parts (``1h-30m`` would read as 1h30m): Go's grammar is
    checked first, so those are rejected as Go rejects them.
    """
    if not _GO_DURATION.fullmatch(text):
        return None
    try:
        return durationpy.from_str(text)
    except durationpy.DurationError:
        return None


def parse_deadline(text: str) -> Deadline:
    """``2026-12-02T18:00:00Z`` (RFC 3339, with offset) or a positive Go duration (``90m``, ``1h30m``, ``1.5h``)."""
    text = text.strip()
    after = parse_duration(text)
    if after is not None:
        if after <= dt.timedelta(0):
            raise ValueError("a deadline duration must be positive")
        if after > MAX_DEADLINE:
            raise ValueError(f"a deadline duration must be at most {format_duration(MAX_DEADLINE.total_seconds())}")
        return Deadline(after=after)
    try:
        at = parse_timestamp(text)
    except ValueError:
        raise ValueError(
            f"{text!r} is neither an RFC 3339 time (2026-12-02T18:00:00Z) nor a Go duration (90m, 1h30m, 1.5h)"
        ) from None
    if at.tzinfo is None:
        raise ValueError(f"{text!r} has no time zone offset; RFC 3339 needs one (e.g. 'Z' or '+01:00')")
    return Deadline(at=at)


MAX_COUNT = 10**12
Count = Annotated[int, pydantic.Field(gt=0, le=MAX_COUNT)]
"""Samples, batch: positive, and small enough for the models' floating point (a trillion at most)."""
MAX_EPOCHS = 10**6
Epochs = Annotated[int, pydantic.Field(gt=0, le=MAX_EPOCHS)]
"""A million passes over the data is a typo, not a training run."""
MAX_DEADLINE = dt.timedelta(days=366)  # a deadline further away is a typo, not a plan

Confidence = Annotated[float, pydantic.Field(gt=0.0, lt=1.0)]
"""The probability an upper bound holds: strictly between 0 and 1."""

Placement = Literal["packed", "spread", "one-per-node"]
"""How the scheduler lays Ray Train workers on nodes: as few nodes as fit, as many as it can, one each."""
BatchScaling = Literal["per-worker", "global"]


class AdvisorInputs(pydantic.BaseModel):
    """What a user asked of the advisor on one RayJob."""

    model_config = pydantic.ConfigDict(frozen=True, extra="forbid")

    workload: str | None = None
    deadline: Deadline | None = None
    mode: Literal["off", "recommend", "enforce"] = "recommend"
    dataset_size: Count | None = None
    epochs: Epochs | None = None
    batch_size: Count | None = None
    batch_size_per_worker: Count | None = None
    batch_scaling: BatchScaling = "per-worker"
    placement: Placement | None = None
    confidence: Confidence = 0.9
    scale_group: str | None = None
    # Kubernetes' rule for env var names; a flag as argparse spells it.
    workers_env: str | None = pydantic.Field(default=None, pattern=r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
    workers_arg: str | None = pydantic.Field(default=None, pattern=r"^--?[a-zA-Z0-9][-_a-zA-Z0-9]*$")
    workers_from: Literal["cluster"] | None = None  # the script sizes Ray Train from the cluster itself
    accelerator: str | None = pydantic.Field(default=None, max_length=63)  # canonical: ``a100``, ``t4``, ...

    @pydantic.field_validator("deadline", mode="before")
    @classmethod
    def _parse_deadline(cls, value: Any) -> Any:
        return parse_deadline(value) if isinstance(value, str) else value

    @pydantic.field_validator("workload", "scale_group", "workers_env", "workers_arg", mode="before")
    @classmethod
    def _strip(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = value.strip()
            if not value:
                raise ValueError("must not be empty")
        return value

    @pydantic.field_validator("accelerator", mode="before")
    @classmethod
    def _canonical_accelerator(cls, value: Any) -> Any:
        """``NVIDIA-A100-SXM4-80GB``, ``nvidia-tesla-a100`` and ``A100`` are one accelerator: ``a100``."""
        if isinstance(value, str):
            if not value.strip():
                raise ValueError("must not be empty")
            return canonical_accelerator(value)
        return value

    @pydantic.model_validator(mode="after")
    def _one_worker_count_source(self) -> AdvisorInputs:
        """The worker count comes from one place; two declarations would contradict each other."""
        given = [key for key in (WORKERS_ENV, WORKERS_ARG, WORKERS_FROM) if getattr(self, _INPUT_FIELDS[key])]
        if len(given) > 1:
            raise ValueError(f"set at most one of {', '.join(given)}")
        return self

    @pydantic.model_validator(mode="after")
    def _one_batch(self) -> AdvisorInputs:
        """One batch size, and ``global`` scaling only of a global batch: the batch rule of the module docstring."""
        if self.batch_size is not None and self.batch_size_per_worker is not None:
            raise ValueError(
                f"set at most one of {BATCH_SIZE} (the global batch) and {BATCH_SIZE_PER_WORKER}, not both"
            )
        if self.batch_scaling == "global" and self.batch_size is None:
            raise ValueError(f"{BATCH_SCALING}=global keeps a global batch fixed: it needs {BATCH_SIZE}")
        return self

    @pydantic.model_validator(mode="after")
    def _samples_in_range(self) -> AdvisorInputs:
        """Dataset x epochs bounds the work the models see (floating point, and plausibility)."""
        if self.dataset_size is not None and self.dataset_size * (self.epochs or 1) > MAX_COUNT:
            raise ValueError(f"{DATASET_SIZE} x {EPOCHS} is more than {MAX_COUNT:.0e} samples to train on")
        return self

    def within_reach(self, now: dt.datetime) -> AdvisorInputs:
        """These inputs, once an absolute deadline is checked against ``now`` (a duration is checked on parsing).

        Raises ``AnnotationError`` for a deadline more than ``MAX_DEADLINE`` away.
        """
        at = self.deadline.at if self.deadline is not None else None
        if at is not None and at - now > MAX_DEADLINE:
            limit = format_duration(MAX_DEADLINE.total_seconds())
            raise AnnotationError(
                f"{DEADLINE}={at.isoformat()!r}: more than {limit} from now; a deadline must be nearer"
            )
        return self


# Words and qualifiers that name no accelerator model: vendors, product lines, memory, form factors, TPU slice kinds.
_VENDOR_WORDS = frozenset({"nvidia", "tesla", "geforce", "quadro", "amd", "instinct", "intel", "graphics"})
_QUALIFIER = re.compile(r"\d+(?:g|gb|gib)|sxm\d*|pcie|hbm\d*e?|nvl|mega|oam|podslice|slice|device")


def canonical_accelerator(text: str) -> str:
    """The short lower-case name of an accelerator in a node label value or a user's text.

    ``NVIDIA-A100-SXM4-80GB`` (``nvidia.com/gpu.product``), ``nvidia-a100-80gb``
    (``cloud.google.com/gke-accelerator``) and ``a100`` (Karpenter) are one
    accelerator, ``a100``: vendor and product-line words, memory sizes and form
    factors are dropped and the rest joined (``NVIDIA-GeForce-RTX-2080-Ti`` ->
    ``rtx2080ti``, ``AMD_Instinct_MI300X_OAM`` -> ``mi300x``). A MIG slice keeps
    its profile (``a100-mig-1g.5gb``: a fraction of the GPU), a TPU its version
    (``tpu-v4-podslice`` -> ``tpu-v4``, ``tpu-v5-lite-podslice`` -> ``tpu-v5e``).
    Text without a model number stays as it is, lower-cased, runs of other
    characters as ``-``.
    """
    normal = re.sub(r"[^a-z0-9.]+", "-", text.strip().lower()).strip("-.")
    model, mig, profile = normal.partition("-mig-")
    tokens = [t for t in model.split("-") if t not in _VENDOR_WORDS and not _QUALIFIER.fullmatch(t)]
    if tokens[:1] == ["tpu"]:
        version = "".join(tokens[1:]).replace("v5lite", "v5e")
        return f"tpu-{version}" if version else normal
    name = "".join(tokens)
    if not name or not any(c.isdigit() for c in name):
        return normal
    return f"{name}-mig-{profile}" if mig else name


def parse_inputs(
    annotations: Mapping[str, str] | None,
    labels: Mapping[str, str] | None = None,
    namespace_labels: Mapping[str, str] | None = None,
) -> AdvisorInputs:
    """Parse the advisor's annotations of a RayJob.

    ``workload`` may also be a label and ``mode`` a namespace label; the
    RayJob's own annotation wins over both.
    """
    raw: dict[str, str] = {}
    if namespace_labels and MODE in namespace_labels:
        raw["mode"] = namespace_labels[MODE]
    if labels and WORKLOAD in labels:
        raw["workload"] = labels[WORKLOAD]
    for key, value in (annotations or {}).items():
        if key in _INPUT_FIELDS:
            raw[_INPUT_FIELDS[key]] = value
    try:
        return AdvisorInputs.model_validate(raw)
    except pydantic.ValidationError as exc:
        messages = []
        for error in exc.errors(include_url=False):
            if not error["loc"]:  # a rule across several annotations names them itself
                messages.append(error["msg"])
                continue
            field = str(error["loc"][0])
            messages.append(f"{_FIELD_KEYS.get(field, field)}={raw.get(field)!r}: {error['msg']}")
        raise AnnotationError("; ".join(messages)) from None


def asks_for_advice(
    annotations: Mapping[str, str] | None, labels: Mapping[str, str] | None, namespace_labels: Mapping[str, str] | None
) -> bool:
    """Whether a RayJob asks for the advisor (docs/scope.md): an input annotation of ours (or ``release``) on it,
    the ``workload`` label, or the ``mode`` label on its namespace. Kueue's rule, a queue-name label, in our words."""
    return bool(_ASKING & set(annotations or {})) or WORKLOAD in (labels or {}) or MODE in (namespace_labels or {})


def validation_problems(exc: pydantic.ValidationError, whole: str, limit: int | None = None) -> str:
    """pydantic's errors in one line, each after the field it is about (``whole``: the object itself), at most
    ``limit`` of them: what a client of an HTTP body or a setting reads (annotations: ``parse_inputs``)."""
    errors = exc.errors(include_url=False)[:limit]
    return "; ".join(f"{'.'.join(map(str, error['loc'])) or whole}: {error['msg']}" for error in errors)


def format_duration(seconds: float) -> str:
    """Whole seconds, rounded up, as the shortest Go duration: ``17m32s``, ``2h5m``, ``45s``, ``0s``.

    What we print (``predicted-runtime``, reasons) parses back as a ``deadline``, and is a valid label value
    (whole numbers: never ``1e+06h``).
    """
    hours, rest = divmod(max(0, math.ceil(seconds)), 3600)
    minutes, whole = divmod(rest, 60)
    return "".join(f"{value}{unit}" for value, unit in ((hours, "h"), (minutes, "m"), (whole, "s")) if value) or "0s"


def format_timestamp(moment: dt.datetime) -> str:
    """RFC 3339 in UTC, whole seconds, ``Z``: how Kubernetes writes times."""
    return moment.astimezone(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def compact_json(value: Mapping[str, Any]) -> str:
    """The JSON form of annotation values: no spaces, stable key order."""
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


class KeyDoc(NamedTuple):
    """One of our keys as the reference documents it (``docs/reference/annotations.md`` is generated from
    ``KEY_DOCS``; ``hack/gen-reference.py``)."""

    key: str
    on: str  # where it goes: a RayJob annotation, a RayJob label, a namespace label, ...
    meaning: str
    example: str


_RAYJOB = "RayJob annotation"
_NAMESPACE = "namespace label"

KEY_DOCS: Mapping[str, tuple[KeyDoc, ...]] = {
    "Set by users on a RayJob": (
        KeyDoc(
            WORKLOAD,
            _RAYJOB + " or label",
            "the workload class: selects the RuntimeProfile. Any of these annotations (or this label) asks for the "
            "advisor: other RayJobs are left alone (docs/scope.md)",
            "digits-cnn",
        ),
        KeyDoc(DATASET_SIZE, _RAYJOB, "samples in the training set; required to predict", '"64000"'),
        KeyDoc(EPOCHS, _RAYJOB, "passes over the dataset", '"5"'),
        KeyDoc(BATCH_SIZE, _RAYJOB, "global batch size (all Ray Train workers together)", '"256"'),
        KeyDoc(BATCH_SIZE_PER_WORKER, _RAYJOB, "per-worker batch size; set at most one of the two batch keys", '"32"'),
        KeyDoc(
            BATCH_SCALING,
            _RAYJOB,
            "which batch stays fixed when the worker count changes: `per-worker` (default) or `global` "
            f"(only with `{BATCH_SIZE}`)",
            "global",
        ),
        KeyDoc(
            PLACEMENT,
            _RAYJOB,
            "how workers land on nodes: `packed`, `spread` or `one-per-node`; overrides what the worker pod "
            "template implies",
            "spread",
        ),
        KeyDoc(
            ACCELERATOR,
            _RAYJOB,
            "the accelerator (GPU model), when the worker group's nodeSelector or node affinity does not name it",
            "a100",
        ),
        KeyDoc(
            DEADLINE,
            _RAYJOB,
            "when the job must be done: an RFC 3339 time, or a Go duration counted from the job's creation "
            "(at most 366 days)",
            "2026-12-02T18:00:00Z, 90m",
        ),
        KeyDoc(
            MODE,
            _RAYJOB + "; also a " + _NAMESPACE,
            "`off` (leave the job alone), `recommend` (default: annotate only) or `enforce` (also resize at "
            "admission); the job's annotation wins over its namespace's label, which also asks for the advisor "
            "for every RayJob of the namespace (docs/scope.md)",
            "enforce",
        ),
        KeyDoc(CONFIDENCE, _RAYJOB, "the probability the upper bound holds, between 0 and 1 (default 0.9)", '"0.9"'),
        KeyDoc(
            SCALE_GROUP,
            _RAYJOB,
            "the worker group to plan and resize (default: the group with GPUs, else the largest)",
            "gpu-workers",
        ),
        KeyDoc(
            WORKERS_ENV,
            _RAYJOB,
            "the environment variable the entrypoint reads its Ray Train worker count from (default `NUM_WORKERS`)",
            "WORLD_SIZE",
        ),
        KeyDoc(WORKERS_ARG, _RAYJOB, "the entrypoint flag that sets the Ray Train worker count", "--num-workers"),
        KeyDoc(
            WORKERS_FROM,
            _RAYJOB,
            "`cluster`: the script sizes Ray Train from the Ray cluster itself, so only the pods are resized",
            "cluster",
        ),
        KeyDoc(
            RELEASE,
            _RAYJOB,
            '`"true"` on a job created with `spec.suspend: true`: unsuspend it once it is planned',
            '"true"',
        ),
    ),
    "Set by users on a namespace": (
        KeyDoc(
            PREFIX + "webhook",
            _NAMESPACE,
            "`enabled` sends the namespace's RayJobs to the admission webhook (the chart's "
            "`webhook.namespaceSelector`)",
            "enabled",
        ),
        KeyDoc(
            HOOK_LABEL_PREFIX + "kueue",
            _NAMESPACE,
            f'`"true"` writes Kueue\'s `{KUEUE_MAX_RUN_DURATION}` at admission; `"false"` turns the chart\'s '
            "`hooks` setting off here",
            '"true"',
        ),
        KeyDoc(
            HOOK_LABEL_PREFIX + "karpenter",
            _NAMESPACE,
            f"the same for `{KARPENTER_DO_NOT_DISRUPT}` on the job's pod templates",
            '"true"',
        ),
        KeyDoc(
            HOOK_LABEL_PREFIX + "progress",
            _NAMESPACE,
            "the same for wiring progress reports into the head pod (needs the chart's `progress.enabled`)",
            '"true"',
        ),
    ),
    "Written by the advisor on a RayJob (never edit them)": (
        KeyDoc(PREDICTED_RUNTIME, _RAYJOB, "the predicted execution time at the median, as a Go duration", "17s"),
        KeyDoc(PREDICTED_RUNTIME_SECONDS, _RAYJOB, "the same, in seconds", '"16.4"'),
        KeyDoc(
            PREDICTION,
            _RAYJOB,
            "compact JSON: model, profile, median (`p50`), upper bound and its confidence, the features used, "
            "what was assumed, when",
            '{"confidence":0.9,"model":"sync-sgd 0.72 + dataparallel 0.28","p50":16.4,'
            '"profile":"shipped/digits-cnn",...}',
        ),
        KeyDoc(
            RECOMMENDATION,
            _RAYJOB,
            "compact JSON, with a deadline: group, replicas (and GPUs per worker), whether it meets the deadline, "
            "the chance it does, the suggested walltime and a one-line reason",
            '{"group":"cpu-workers","meetsDeadline":true,"replicas":1,...}',
        ),
        KeyDoc(
            ORIGINAL_REPLICAS,
            _RAYJOB,
            "after `enforce` resized the job: the replicas and Ray Train worker count it was created with",
            '{"groupName":"cpu-workers","replicas":2,...}',
        ),
        KeyDoc(ETA, _RAYJOB, "once the job runs: its expected end at the median (RFC 3339)", "2026-12-02T17:42:10Z"),
        KeyDoc(ETA_UPPER, _RAYJOB, "the expected end at the upper bound", "2026-12-02T17:44:55Z"),
        KeyDoc(PROGRESS, _RAYJOB, "the first and latest progress report (JSON), once the job reports", "{...}"),
        KeyDoc(
            ALERTS,
            _RAYJOB,
            "the warnings already posted for a running job, each once",
            "DeadlineAtRisk,RuntimeOverrun",
        ),
        KeyDoc(
            ACTUAL_RUNTIME_SECONDS,
            _RAYJOB,
            "after the job succeeded: its execution time (end - start of `status.rayJobInfo`)",
            '"15.9"',
        ),
        KeyDoc(PREDICTION_ERROR, _RAYJOB, "after the job succeeded: predicted / actual - 1", '"+0.0314"'),
        KeyDoc(
            ERROR,
            _RAYJOB,
            "why no prediction could be made, and what to fix (removed once a prediction succeeds)",
            "dataset-size: Input should be greater than 0",
        ),
    ),
    "Labels written by the advisor on a RayJob (for `kubectl get -L` and `-l`)": (
        KeyDoc(PREDICTED, "RayJob label", "the median runtime as a Go duration, as in `predicted-runtime`", "1h8m20s"),
        KeyDoc(
            DEADLINE_STATUS,
            "RayJob label",
            "`none` (no deadline); before the end `on-track` or `at-risk` (whether the job, at the size it will run "
            "at, ends by the deadline at the upper bound); once finished `met`, `missed` or `failed`",
            "on-track",
        ),
    ),
    "Names shared with other projects": (
        KeyDoc(
            PLANNER_GATE,
            f"an entry of the RayJob annotation `{KUEUE_GATES}`",
            "a job that lists it waits for the planner; only this gate is removed once the job is planned",
            PLANNER_GATE,
        ),
        KeyDoc(
            KUEUE_MAX_RUN_DURATION,
            _RAYJOB + " (Kueue's)",
            "with the `kueue` hook: the expected walltime in seconds, which Kueue passes to its ProvisioningRequest",
            '"1800"',
        ),
        KeyDoc(
            KARPENTER_DO_NOT_DISRUPT,
            "pod template annotation (Karpenter's)",
            "with the `karpenter` hook: the expected walltime, a duration from each pod's start",
            "30m",
        ),
    ),
}
"""Every key users set or the advisor writes, by where it goes; ``tests/test_reference.py`` checks it covers the
keys above."""
