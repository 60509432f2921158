"""What each key of the annotation contract means, where it goes and an example: the source of the generated
reference (``docs/reference/annotations.md``, by ``hack/gen-reference.py``); ``tests/test_reference.py`` checks
that it covers every key of ``contract``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from rayjob_advisor.contract import (
    ACCELERATOR,
    ACTUAL_RUNTIME_SECONDS,
    ALERTS,
    BATCH_SCALING,
    BATCH_SIZE,
    BATCH_SIZE_PER_WORKER,
    CONFIDENCE,
    DATASET_SIZE,
    DEADLINE,
    DEADLINE_STATUS,
    EPOCHS,
    ERROR,
    ETA,
    ETA_UPPER,
    HELD,
    HOOK_LABEL_PREFIX,
    KARPENTER_DO_NOT_DISRUPT,
    KUEUE_GATES,
    KUEUE_MAX_RUN_DURATION,
    MODE,
    NOTE,
    ORIGINAL_REPLICAS,
    PLACEMENT,
    PLANNER_GATE,
    PREDICTED,
    PREDICTED_RUNTIME,
    PREDICTED_RUNTIME_SECONDS,
    PREDICTION,
    PREDICTION_ERROR,
    PREFIX,
    PROGRESS,
    RECOMMENDATION,
    RELEASE,
    SCALE_GROUP,
    WORKERS_ARG,
    WORKERS_ENV,
    WORKERS_FROM,
    WORKLOAD,
)


class KeyDoc(NamedTuple):
    """One of our keys as the reference documents it."""

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
            '`"true"` on a job created with `spec.suspend: true` (and no `kueue.x-k8s.io/queue-name` label): '
            "unsuspend it once it is planned; honoured only on a job the webhook admitted so (`held`)",
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
            "the chance it does, the suggested walltime and a one-line reason; with the kuberay hook (with or "
            "without a deadline), kuberay: the activeDeadlineSeconds and preRunningDeadlineSeconds it advises, and "
            "a reason where the job's own are lower",
            '{"group":"cpu-workers","meetsDeadline":true,"replicas":1,...}',
        ),
        KeyDoc(
            ORIGINAL_REPLICAS,
            _RAYJOB,
            "after `enforce` resized the job: the replicas and Ray Train worker count it was created with",
            '{"groupName":"cpu-workers","replicas":2,...}',
        ),
        KeyDoc(
            HELD,
            _RAYJOB,
            "the webhook admitted the job created suspended with `release`: the controller unsuspends it once "
            "planned; the webhook puts back any change but the advisor's own, and the release removes it",
            '"true"',
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
        KeyDoc(
            NOTE,
            _RAYJOB,
            "why there is no prediction yet when nothing is wrong: the workload has no profile the job may use, or "
            "too few runs in it; its finished jobs make one (removed once a prediction succeeds)",
            "no profile yet for workload 'bert' in namespace 'team-a': it is learned from this workload's "
            "finished jobs",
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
"""Every key users set or the advisor writes, by where it goes."""
