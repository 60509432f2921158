"""The annotation contract of DESIGN §3: parse what users set, render what we write.

Every user annotation is parsed once, at the boundary, into the frozen
``AdvisorInputs``; its pydantic error text is what users see in the
``error`` annotation, the Warning Event or the CLI message.
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

PREFIX = "rayjob-advisor.io/"

# Keys set by users.
WORKLOAD = PREFIX + "workload"
DEADLINE = PREFIX + "deadline"
MODE = PREFIX + "mode"
DATASET_SIZE = PREFIX + "dataset-size"
EPOCHS = PREFIX + "epochs"
BATCH_SIZE = PREFIX + "batch-size"
CONFIDENCE = PREFIX + "confidence"
SCALE_GROUP = PREFIX + "scale-group"
RELEASE = PREFIX + "release"  # "true" on a suspended RayJob: we unsuspend it once planned
# Where the job sets its Ray Train worker count: an env var name, an entrypoint flag, or "cluster".
WORKERS_ENV = PREFIX + "workers-env"
WORKERS_ARG = PREFIX + "workers-arg"
WORKERS_FROM = PREFIX + "workers-from"

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

_INPUT_FIELDS = {
    WORKLOAD: "workload",
    DEADLINE: "deadline",
    MODE: "mode",
    DATASET_SIZE: "dataset_size",
    EPOCHS: "epochs",
    BATCH_SIZE: "batch_size",
    CONFIDENCE: "confidence",
    SCALE_GROUP: "scale_group",
    WORKERS_ENV: "workers_env",
    WORKERS_ARG: "workers_arg",
    WORKERS_FROM: "workers_from",
}
_FIELD_KEYS = {field: key for key, field in _INPUT_FIELDS.items()}
INPUT_KEYS: tuple[str, ...] = tuple(_INPUT_FIELDS)


class Deadline(pydantic.BaseModel):
    """An absolute time, or a duration counted from the RayJob's creation."""

    model_config = pydantic.ConfigDict(frozen=True)

    at: dt.datetime | None = None
    after: dt.timedelta | None = None

    def resolve(self, created: dt.datetime) -> dt.datetime:
        """The absolute deadline of a RayJob created at ``created``."""
        return self.at if self.at is not None else created + self.after  # type: ignore[operator]


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
"""Samples, epochs, batch: positive, and small enough for the models' floating point (a trillion at most)."""
MAX_DEADLINE = dt.timedelta(days=366)  # a deadline further away is a typo, not a plan

Confidence = Annotated[float, pydantic.Field(gt=0.0, lt=1.0)]
"""The probability an upper bound holds: strictly between 0 and 1."""


class AdvisorInputs(pydantic.BaseModel):
    """What a user asked of the advisor on one RayJob."""

    model_config = pydantic.ConfigDict(frozen=True, extra="forbid")

    workload: str | None = None
    deadline: Deadline | None = None
    mode: Literal["off", "recommend", "enforce"] = "recommend"
    dataset_size: Count | None = None
    epochs: Count | None = None
    batch_size: Count | None = None
    confidence: Confidence = 0.9
    scale_group: str | None = None
    # Kubernetes' rule for env var names; a flag as argparse spells it.
    workers_env: str | None = pydantic.Field(default=None, pattern=r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
    workers_arg: str | None = pydantic.Field(default=None, pattern=r"^--?[a-zA-Z0-9][-_a-zA-Z0-9]*$")
    workers_from: Literal["cluster"] | None = None  # the script sizes Ray Train from the cluster itself

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

    @pydantic.model_validator(mode="after")
    def _one_worker_count_source(self) -> AdvisorInputs:
        """The worker count comes from one place; two declarations would contradict each other."""
        given = [key for key in (WORKERS_ENV, WORKERS_ARG, WORKERS_FROM) if getattr(self, _INPUT_FIELDS[key])]
        if len(given) > 1:
            raise ValueError(f"set at most one of {', '.join(given)}")
        return self


class AnnotationError(ValueError):
    """User annotations that cannot be parsed; the message names each key."""


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


def format_duration(seconds: float) -> str:
    """Whole seconds, rounded up, as the shortest Go duration: ``17m32s``, ``2h5m``, ``45s``, ``0s``.

    What we print (``predicted-runtime``, reasons) parses back as a ``deadline``.
    """
    total = max(0, math.ceil(seconds))
    return durationpy.to_str(dt.timedelta(seconds=total)) if total else "0s"


def format_timestamp(moment: dt.datetime) -> str:
    """RFC 3339 in UTC, whole seconds, ``Z``: how Kubernetes writes times."""
    return moment.astimezone(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def compact_json(value: Mapping[str, Any]) -> str:
    """The JSON form of annotation values: no spaces, stable key order."""
    return json.dumps(value, separators=(",", ":"), sort_keys=True)
