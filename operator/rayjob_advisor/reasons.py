"""The reasons of every Kubernetes Event (and admission warning) the advisor gives, in one place (as KEDA keeps them).

Users filter on them (``kubectl get events --field-selector reason=DeadlineAtRisk``) and alerts may match
them: a reason is part of the contract, spelled once here. Warnings carry a ``Warning`` Event, the others a
``Normal`` one; some are admission warnings only (``Message.event`` false).
"""

from __future__ import annotations

from typing import Final, NamedTuple

# Advice before a RayJob runs (application.advise).
CANNOT_PREDICT: Final = "CannotPredict"  # bad input or an unknown workload: the ``error`` annotation says what
NO_PROFILE_YET: Final = "NoProfileYet"  # a workload's first jobs: the ``note`` annotation says so
RECOMMENDED: Final = "Recommended"  # a plan in ``recommend`` mode (an admission warning only)
RESIZED: Final = "Resized"  # ``enforce`` resized the scaled group and Ray Train with it
NOT_RESIZED: Final = "NotResized"  # ``enforce`` could not resize: the text names the annotation to add
OTHER_ACCELERATOR: Final = "OtherAccelerator"  # predicted from another accelerator's runs
PROGRESS_OFF: Final = "ProgressOff"  # the progress hook is on where reporting is off (an admission warning only)
NOT_ADVISED: Final = "NotAdvised"  # the webhook admitted the job unchanged (a fit under way, our own failure)

# A running RayJob (the sweep); each posted once per job.
DEADLINE_AT_RISK: Final = "DeadlineAtRisk"
RUNTIME_OVERRUN: Final = "RuntimeOverrun"

# A finished RayJob (application.learn).
LEARNED: Final = "Learned"
CANNOT_LEARN: Final = "CannotLearn"
DEADLINE_MET: Final = "DeadlineMet"
DEADLINE_MISSED: Final = "DeadlineMissed"
DEADLINE_FAILED: Final = "DeadlineFailed"

# A RuntimeProfile: the reasons of its ``Fitted`` condition, and of the Events of a failed fit or a bad profile.
FITTED: Final = "Fitted"
NOT_ENOUGH_DATA: Final = "NotEnoughData"
FIT_FAILED: Final = "FitFailed"
BAD_PROFILE: Final = "BadProfile"
DUPLICATE_WORKLOAD: Final = "DuplicateWorkload"


class ReasonDoc(NamedTuple):
    """One reason as the reference documents it (``docs/reference/events.md`` is generated from ``REASON_DOCS``)."""

    reason: str
    kind: str  # how it is given: a Warning or Normal Event, an admission warning, a condition reason
    means: str
    do: str


_WARNING = "Warning Event, admission warning"
REASON_DOCS: tuple[ReasonDoc, ...] = (
    ReasonDoc(
        CANNOT_PREDICT,
        _WARNING,
        "no prediction: bad input, an unknown workload or a RayJob that cannot be predicted; the same text is in "
        "the job's `rayjob-advisor.io/error` annotation",
        "fix what the message names (see Troubleshooting); the advisor predicts again when the annotations or spec "
        "change",
    ),
    ReasonDoc(
        NO_PROFILE_YET,
        "Normal Event, admission warning",
        "no prediction yet: no profile of the job's workload is visible from its namespace, or its own has too few "
        "runs to fit; the same text is in the job's `rayjob-advisor.io/note` annotation",
        "nothing: each finished job of the workload is learned into a RuntimeProfile in its namespace, predictions "
        "start once it is fitted (8 runs); check the workload's spelling, or profile it first "
        "(docs/guides/profiles.md)",
    ),
    ReasonDoc(
        RECOMMENDED,
        "admission warning",
        "a plan in `recommend` mode: the size that meets the deadline most cheaply, and why",
        "nothing; resize the job yourself, or use `enforce`",
    ),
    ReasonDoc(
        RESIZED, "Normal Event, admission warning", "`enforce` resized the job: what changed, and why", "nothing"
    ),
    ReasonDoc(
        NOT_RESIZED,
        _WARNING,
        "`enforce` planned a new size but left the job as it is: its Ray Train worker count cannot be found or "
        "rewritten, or its batch or epochs are not given",
        "add the annotation the message names (e.g. `rayjob-advisor.io/workers-env`, `batch-size-per-worker`, "
        "`epochs`)",
    ),
    ReasonDoc(
        OTHER_ACCELERATOR,
        _WARNING,
        "the profile has no runs on the job's accelerator (or the job names none): the prediction comes from "
        "another accelerator's runs, shown under `assumed`",
        "set `rayjob-advisor.io/accelerator`, or profile the workload on that accelerator",
    ),
    ReasonDoc(
        PROGRESS_OFF,
        "admission warning",
        "the progress hook is on for the namespace but progress reporting is off in the chart: nothing injected",
        "set the chart's `progress.enabled=true`, or remove the namespace's `rayjob-advisor.io/hook-progress` label",
    ),
    ReasonDoc(
        NOT_ADVISED,
        _WARNING,
        "the webhook admitted the RayJob unchanged: its profile is still being fitted, the advisor's annotations "
        "would pass Kubernetes' size limit, or the advisor failed",
        "usually nothing: the controller predicts the job shortly; if the text names an internal error, report it",
    ),
    ReasonDoc(
        DEADLINE_AT_RISK,
        "Warning Event",
        "a running job's end at the upper bound (`eta-upper`) has passed its deadline, while the deadline is still "
        "ahead",
        "decide whether to let it run, or stop it and resubmit it larger",
    ),
    ReasonDoc(
        RUNTIME_OVERRUN,
        "Warning Event",
        "a running job has run longer than its prediction's upper bound",
        "check the job (stuck, slower nodes, more data than annotated); many of them fire the "
        "coverage alert (runbooks)",
    ),
    ReasonDoc(LEARNED, "Normal Event", "a finished job's run was added to its workload's profile", "nothing"),
    ReasonDoc(
        CANNOT_LEARN,
        "Warning Event",
        "a finished job's status is malformed: its run was not learned",
        "check the job's `status.rayJobInfo` times; KubeRay writes them",
    ),
    ReasonDoc(DEADLINE_MET, "Normal Event", "a job with a deadline finished in time", "nothing"),
    ReasonDoc(
        DEADLINE_MISSED,
        "Warning Event",
        "a job with a deadline finished after it (the message says by how much)",
        "see the runbook of the deadline alert",
    ),
    ReasonDoc(DEADLINE_FAILED, "Warning Event", "a job with a deadline failed", "look at the job's own failure"),
    ReasonDoc(FITTED, "RuntimeProfile condition type", "whether the profile's current runs are fitted", "nothing"),
    ReasonDoc(
        NOT_ENOUGH_DATA,
        "condition reason, Warning Event",
        "the profile has too few runs, or too few distinct configurations, to fit a model",
        "add runs (a profiling sweep over several worker counts and dataset sizes); an earlier fit stays in use",
    ),
    ReasonDoc(
        FIT_FAILED,
        "condition reason, Warning Event",
        "fitting the profile failed (the message says why); an earlier fit stays in use",
        "check the profile's runs; if they look right, report the message",
    ),
    ReasonDoc(
        BAD_PROFILE,
        "condition reason, Warning Event",
        "the RuntimeProfile cannot be used: no workload, or an invalid run; it is skipped",
        "fix the object (`kubectl get runtimeprofile NAME -o yaml`), e.g. re-create it with "
        "`rayjob-advisor profile --emit-profile`",
    ),
    ReasonDoc(
        DUPLICATE_WORKLOAD,
        "condition reason, Warning Event",
        "an older RuntimeProfile in the namespace names the same workload (the message names it): that one is used, "
        "this one never predicts",
        "delete one of the two, or rename this one's `spec.workload`",
    ),
)
"""Every reason above, documented; ``tests/test_reference.py`` checks none is missing."""
