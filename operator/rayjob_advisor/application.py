"""The advisor's two decisions about one RayJob, as plain data the kopf handlers only apply.

``advise``: before a RayJob runs, one merge patch (the prediction and
recommendation annotations, in ``enforce`` mode the resized worker group
(replicas and, where the plan changes them, GPUs per worker) and Ray Train
worker count — both or neither — with ``original-replicas``,
and the release of a job held for us) and the messages that explain it.
``enforce`` never resizes a job whose plan rests on an input it does not
give (its batch, its epochs): the recommendation says which annotation to
add (``NotResized``), as it does when Ray Train could not follow the pods.
``learn``: when it has finished, what its run teaches (the observation to
append, the error of our prediction, its deadline outcome). Bad input never raises: it becomes the ``error``
annotation and a warning.
"""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Mapping
from typing import Any

import pydantic

from rayjob_advisor import completions, contract, hooks, planner, prediction, profiles
from rayjob_advisor.features import Features, UnpredictableJob, features_from_rayjob
from rayjob_advisor.hooks import Progress
from rayjob_advisor.models.runtime import RuntimeModel
from rayjob_advisor.observations import AcceleratorChoice, Observation
from rayjob_advisor.rayjob import MergePatch, RayJob, merge


class ProfileNotReady(Exception):
    """The job's profile has no fitted model yet: try again shortly, never fit on the request path."""


class Policy(pydantic.BaseModel):
    """What the operator's configuration and the job's namespace decide for every job."""

    model_config = pydantic.ConfigDict(frozen=True)

    default_workload: str | None = None
    prices: planner.Prices = planner.Prices()
    namespace_labels: Mapping[str, str] = pydantic.Field(default_factory=dict)
    hooks: frozenset[str] = frozenset()  # configured hooks (see ``hooks``); namespace labels may change them
    progress: Progress | None = None  # where reports go (the ``progress`` hook); None: reporting is off


class Message(pydantic.BaseModel):
    """One thing to tell the user: an admission warning, and for ``event`` ones a Kubernetes Event."""

    model_config = pydantic.ConfigDict(frozen=True)

    reason: str  # the Event reason, CamelCase
    text: str
    warning: bool = False
    event: bool = True


class Advice(pydantic.BaseModel):
    """What ``advise`` decided: one merge patch for the RayJob and the messages that explain it."""

    model_config = pydantic.ConfigDict(frozen=True)

    patch: MergePatch = pydantic.Field(default_factory=dict)
    messages: tuple[Message, ...] = ()
    workload: str | None = None
    p50: float | None = None
    error: str | None = None
    resized: bool = False
    walltime: float | None = None  # expected start-up + upper bound of the job as advised, in seconds

    @property
    def warnings(self) -> list[str]:
        """The admission warnings ``kubectl apply`` prints."""
        return [f"rayjob-advisor: {message.text}" for message in self.messages]


def job_inputs(rayjob: RayJob, policy: Policy) -> contract.AdvisorInputs:
    """A RayJob's parsed advisor inputs, the configured default workload filling in a missing one."""
    inputs = contract.parse_inputs(rayjob.annotations, rayjob.labels, policy.namespace_labels)
    return inputs.model_copy(update={"workload": inputs.workload or policy.default_workload})


def advise(
    body: Mapping[str, Any], store: profiles.ProfileStore, *, policy: Policy, may_resize: bool, now: dt.datetime
) -> Advice:
    """The advisor's changes to one RayJob that has not started (an empty patch in mode ``off``).

    Before KubeRay builds the cluster (``may_resize``), the enabled ``hooks`` carry the expected walltime of
    the job as advised (resized or not) to the schedulers that read it, and wire its head pod to report
    progress (a job the advisor does not predict has no ETA to refine: it gets no hooks).
    """
    advice = _advise(body, store, policy=policy, may_resize=may_resize, now=now)
    enabled = hooks.enabled(policy.hooks, policy.namespace_labels)
    if not may_resize or not enabled or advice.walltime is None:
        return advice
    advised = merge(copy.deepcopy(dict(body)), advice.patch)  # a resize replaces the group list the hooks add to
    written = hooks.patch(advised, enabled, advice.walltime, policy.progress)
    advice = advice.model_copy(update={"patch": merge(advice.patch, written)})
    if "progress" in enabled and policy.progress is None:
        off = Message(reason="ProgressOff", text=f"{hooks.PROGRESS_OFF}: nothing injected", warning=True, event=False)
        return advice.model_copy(update={"messages": (*advice.messages, off)})
    return advice


def _advise(
    body: Mapping[str, Any], store: profiles.ProfileStore, *, policy: Policy, may_resize: bool, now: dt.datetime
) -> Advice:
    """``advise`` without the hooks.

    ``may_resize``: KubeRay has not built the cluster yet (admission of a
    CREATE, or a job held for us), so ``enforce`` may resize the scaled group
    and a held job is released — whatever the advice, a RayJob is never left
    waiting for us. Raises ``ProfileNotReady`` while the profile's first fit
    is still running (the job stays held until it is done).
    """
    rayjob = RayJob(body)
    release = rayjob.release() if may_resize else {}
    try:
        inputs = job_inputs(rayjob, policy).within_reach(now)
    except contract.AnnotationError as exc:
        return _bad_input(rayjob, str(exc), release, workload=None)
    if inputs.mode == "off":
        return Advice(patch=release)
    try:
        job = features_from_rayjob(body, inputs)
        prediction.require_predictable(job)
        profile, model, choice = fitted_profile(store, rayjob.namespace, inputs.workload, job.accelerator)
    except (UnpredictableJob, contract.AnnotationError, profiles.UnknownWorkload) as exc:
        return _bad_input(rayjob, str(exc), release, workload=inputs.workload)
    result, plan = prediction.forecast(
        body, inputs, job, model, profile.label, policy.prices, now, assumed_accelerator=choice.assumed
    )
    other = choice.warning(profile.label)
    heads_up = (Message(reason="OtherAccelerator", text=other, warning=True),) if other else ()
    notes: dict[str, str | None] = {**result.annotations(), contract.ERROR: None}
    notes |= {contract.PREDICTED: contract.format_duration(result.p50), contract.DEADLINE_STATUS: "none"}
    startup = float(model.startup([job])[0])
    known = {"workload": inputs.workload, "p50": result.p50, "walltime": startup + result.upper}
    if plan is None:
        return Advice(patch=merge(_annotations(notes), release), messages=heads_up, **known)
    enforce = may_resize and inputs.mode == "enforce" and plan.changes
    blocker = job.enforce_blocker if enforce else None
    if blocker:
        plan = plan.model_copy(update={"reason": f"{plan.reason}; not resized: {blocker}"})
    notes[contract.RECOMMENDATION] = plan.annotation()
    as_is = None if enforce and not blocker else (startup, result.upper)
    notes[contract.DEADLINE_STATUS] = _deadline_status(plan, now, as_is)
    if enforce and not blocker:
        return _told(_resized(rayjob, job, plan, notes, release, known), *heads_up)
    text = f"recommends {plan.size}: {plan.reason}"
    if blocker:
        message = Message(reason="NotResized", text=text, warning=True)
    else:
        message = Message(reason="Recommended", text=text, event=False)
    return Advice(patch=merge(_annotations(notes), release), messages=(*heads_up, message), **known)


def _told(advice: Advice, *first: Message) -> Advice:
    """``advice`` with ``first`` told before its own messages."""
    return advice.model_copy(update={"messages": (*first, *advice.messages)})


def _resized(
    rayjob: RayJob,
    job: Features,
    plan: planner.Recommendation,
    notes: dict[str, str | None],
    release: MergePatch,
    known: dict[str, Any],
) -> Advice:
    """The advice that applies ``plan`` to the scaled group and Ray Train alike, recording what they had before."""
    assert job.scale_group is not None  # a plan that changes the size has a group to change
    gpus = plan.gpus_per_worker if plan.gpus_per_worker != plan.current_gpus_per_worker else None
    resize, original = rayjob.resize(job.scale_group.index, plan.replicas, gpus)
    changes = [f"replicas {plan.current_replicas} -> {plan.replicas}"] if plan.replicas != plan.current_replicas else []
    if gpus is not None:
        original["gpusPerWorker"] = plan.current_gpus_per_worker
        changes.append(f"GPUs per worker {plan.current_gpus_per_worker:g} -> {gpus:g}")
    training = job.training
    if training.count is not None and plan.replicas != plan.current_replicas:
        count = job.with_replicas(plan.replicas).workers
        merge(resize, rayjob.set_training_workers(training, count))
        original["training"] = {"method": training.method, "place": training.place, "workers": training.count}
        changes.append(f"{training.name} {training.count} -> {count} in {training.place}")
    notes[contract.ORIGINAL_REPLICAS] = contract.compact_json(original)
    patch = merge(merge(_annotations(notes), resize), release)
    listed = ", ".join(changes[:-1]) + " and " + changes[-1] if len(changes) > 1 else changes[0]
    message = Message(reason="Resized", text=f"set {plan.group} {listed}: {plan.reason}")
    known = {**known, "walltime": plan.walltime}  # the size the job now has
    return Advice(patch=patch, messages=(message,), resized=True, **known)


def _deadline_status(
    plan: planner.Recommendation, now: dt.datetime, as_is: tuple[float, float] | None
) -> contract.DeadlineStatus:
    """``on-track`` when the job ends by its deadline at the upper bound, else ``at-risk``: at the plan's size,
    or at its own (``as_is``: its start-up and upper bound) when it is not resized, by the planner's rule."""
    if as_is is None:
        meets = plan.meets_deadline
    else:
        meets = planner.finishes_in_time(*as_is, (plan.deadline - now).total_seconds())
    return "on-track" if meets else "at-risk"


def _annotations(notes: Mapping[str, str | None]) -> MergePatch:
    """The metadata patch of ``notes``: the label mirror's keys (``contract.LABEL_KEYS``) as labels."""
    labels = {key: value for key, value in notes.items() if key in contract.LABEL_KEYS}
    metadata = {"annotations": {key: value for key, value in notes.items() if key not in labels}}
    return {"metadata": {**metadata, "labels": labels} if labels else metadata}


def failed(body: Mapping[str, Any], message: str, *, may_resize: bool) -> Advice:
    """The advice when ``advise`` itself failed (a bug of ours, a value no check caught): the ``error``
    annotation and a warning, the release of a held job — reported on the job, never retried forever."""
    rayjob = RayJob(body)
    return _bad_input(rayjob, message, rayjob.release() if may_resize else {}, workload=None)


def _bad_input(rayjob: RayJob, message: str, release: MergePatch, workload: str | None) -> Advice:
    """The ``error`` annotation and a warning; an Event only when the error is new (no repeats on updates)."""
    new = rayjob.annotations.get(contract.ERROR) != message
    note = Message(reason="CannotPredict", text=message, warning=True, event=new)
    patch = merge(_annotations({contract.ERROR: message}), release)
    return Advice(patch=patch, messages=(note,), workload=workload, error=message)


def fitted_profile(
    store: profiles.ProfileStore, namespace: str, workload: str | None, accelerator: str | None
) -> tuple[profiles.Profile, RuntimeModel, AcceleratorChoice]:
    """The job's profile and the model of its accelerator's runs (or the stand-in's, ``choice``); a failed fit is
    the user's problem to see, a running one (or one of an accelerator no job asked for before) is not."""
    profile = store.find(namespace, profiles.require_workload(workload))
    choice = profile.choose(accelerator)
    model, error = profile.model_for(choice.used)
    if model is None:
        if error:
            raise profiles.UnknownWorkload(f"profile {profile.label}: {error}")
        raise ProfileNotReady(
            f"profile {profile.label} is being fitted" + (f" on {choice.used}" if choice.used else "")
        )
    return profile, model, choice


class Lesson(pydantic.BaseModel):
    """What a finished RayJob teaches: the annotations to write, the run to learn, how we did."""

    model_config = pydantic.ConfigDict(frozen=True)

    patch: MergePatch = pydantic.Field(default_factory=dict)
    messages: tuple[Message, ...] = ()
    completion: completions.Completion | None = None
    deadline: completions.DeadlineOutcome | None = None

    @property
    def observation(self) -> Observation | None:
        return self.completion.observation if self.completion else None


def learn(body: Mapping[str, Any], policy: Policy) -> Lesson:
    """A finished RayJob's actual runtime, our error and its deadline outcome; a malformed status is reported."""
    rayjob = RayJob(body)
    try:
        inputs: contract.AdvisorInputs | None = job_inputs(rayjob, policy)
    except contract.AnnotationError:
        inputs = None
    try:
        job = features_from_rayjob(body, inputs) if inputs is not None and inputs.workload else None
    except (contract.AnnotationError, UnpredictableJob):
        job = None
    try:
        completion = completions.completion(body, job)
        outcome = completions.deadline_outcome(body, inputs) if inputs is not None else None
    except ValueError as exc:
        text = f"finished RayJob has a malformed status: {exc}"
        return Lesson(messages=(Message(reason="CannotLearn", text=text, warning=True),))
    messages = () if outcome is None else (_deadline_message(outcome),)
    patch = _annotations(completion.annotations() | ({contract.DEADLINE_STATUS: outcome.outcome} if outcome else {}))
    return Lesson(patch=patch, messages=messages, completion=completion, deadline=outcome)


def _deadline_message(outcome: completions.DeadlineOutcome) -> Message:
    reason = {"met": "DeadlineMet", "missed": "DeadlineMissed", "failed": "DeadlineFailed"}[outcome.outcome]
    return Message(reason=reason, text=outcome.message(), warning=outcome.outcome != "met")
