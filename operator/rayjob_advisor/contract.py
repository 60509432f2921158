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
from typing import Annotated, Any, Literal

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
RELEASE = PREFIX + "release"  # "true" on a RayJob created suspended: we unsuspend it once planned (``HELD``)
# Where the job sets its Ray Train worker count: an env var name, an entrypoint flag, or "cluster".
WORKERS_ENV = PREFIX + "workers-env"
WORKERS_ARG = PREFIX + "workers-arg"
WORKERS_FROM = PREFIX + "workers-from"
ACCELERATOR = PREFIX + "accelerator"  # when the worker group's nodeSelector / node affinity does not say it

# Kueue's admission gates: a comma-separated list of controllers a job waits for.
KUEUE_GATES = "kueue.x-k8s.io/admission-gated-by"
PLANNER_GATE = PREFIX + "planner"
KUEUE_QUEUE = "kueue.x-k8s.io/queue-name"  # a label: Kueue manages the job, its ``suspend`` is Kueue's

# Keys written by the advisor.
PREDICTED_RUNTIME = PREFIX + "predicted-runtime"
PREDICTED_RUNTIME_SECONDS = PREFIX + "predicted-runtime-seconds"
PREDICTION = PREFIX + "prediction"
RECOMMENDATION = PREFIX + "recommendation"
ORIGINAL_REPLICAS = PREFIX + "original-replicas"
ACTUAL_RUNTIME_SECONDS = PREFIX + "actual-runtime-seconds"
PREDICTION_ERROR = PREFIX + "prediction-error"
ERROR = PREFIX + "error"
NOTE = PREFIX + "note"  # not an error: e.g. no profile yet, learned from the job once it finishes
# "true": the webhook admitted the job created suspended with ``release``; only the advisor writes it (the webhook
# puts back anyone else's change), and the controller unsuspends only a job that carries it.
HELD = PREFIX + "held"
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
PROGRESS_CA_DIR = "/var/run/rayjob-advisor-ca"  # where the hook mounts the CA's ConfigMap
PROGRESS_CA_PATH = "ca.crt"  # its key, and the file in PROGRESS_CA_DIR
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
MAX_WORKLOAD = 253
"""The longest workload name: the most a RuntimeProfile's ``spec.workload`` holds (its CRD's ``maxLength``)."""
MAX_DEADLINE = dt.timedelta(days=366)  # a deadline further away is a typo, not a plan

Confidence = Annotated[float, pydantic.Field(gt=0.0, lt=1.0)]
"""The probability an upper bound holds: strictly between 0 and 1."""

Placement = Literal["packed", "spread", "one-per-node"]
"""How the scheduler lays Ray Train workers on nodes: as few nodes as fit, as many as it can, one each."""
BatchScaling = Literal["per-worker", "global"]


class AdvisorInputs(pydantic.BaseModel):
    """What a user asked of the advisor on one RayJob."""

    model_config = pydantic.ConfigDict(frozen=True, extra="forbid")

    workload: str | None = pydantic.Field(default=None, max_length=MAX_WORKLOAD)
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


# Words and qualifiers that name no accelerator model: vendors, product lines, architectures, memory, power limits,
# form factors, TPU slice kinds.
_VENDOR_WORDS = frozenset(
    {"nvidia", "tesla", "geforce", "quadro", "amd", "instinct", "intel", "graphics", "gpu"}
    | {"ampere", "hopper", "blackwell", "ultra"}
)
_QUALIFIER = re.compile(r"\d+(?:g|gb|gib|w)|sxm\d*|pcie|hbm\d*e?|nvl|mega|oam|podslice|slice|device")


def canonical_accelerator(text: str) -> str:
    """The short lower-case name of an accelerator in a node label value or a user's text.

    ``NVIDIA-A100-SXM4-80GB`` (``nvidia.com/gpu.product``), ``nvidia-a100-80gb``
    (``cloud.google.com/gke-accelerator``) and ``a100`` (Karpenter) are one
    accelerator, ``a100``: vendor, product-line and architecture words, memory
    sizes, power limits (``NVIDIA A100-SXM4-40GB (400W)`` in MLPerf's system
    descriptions) and form factors are dropped and the rest joined
    (``NVIDIA-GeForce-RTX-2080-Ti`` -> ``rtx2080ti``, ``AMD_Instinct_MI300X_OAM``
    -> ``mi300x``). A MIG slice keeps
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
