"""Start here: what the advisor does with a RayJob, as plain data that the operator, the CLI and the plugin present.

``forecast``: what the advisor makes of a RayJob that has not started — its
features, the prediction, the plan for its deadline, and everything it
writes: one merge patch (the prediction and recommendation annotations and
their label mirror; in ``enforce`` mode the resized worker group (replicas
and, where the plan changes them, GPUs per worker) and Ray Train worker
count — both or neither — with ``original-replicas``; the release of a job
held for us; the hooks' writes) and the messages that explain it.
``enforce`` never resizes a job whose plan rests on an input it does not
give (its batch, its epochs): the recommendation says which annotation to
add (``NotResized``), as it does when Ray Train could not follow the pods.
The operator, ``rayjob-advisor predict`` and ``kubectl rayjob-advisor
what-if`` all ask it, with the prices, default workload and hooks of the
one configuration (``Policy``).

``advise``: the operator's ``forecast``, bad input turned into the ``error``
annotation and a warning (it never raises for it), a workload's first jobs
into a ``note``. ``learn``: when a job has
finished, what its run teaches (the observation to append, the error of our
prediction, its deadline outcome).

``in_scope``: whether the operator handles a RayJob at all. It advises only
the jobs that ask (``left_alone``, docs/scope.md), as Kueue manages only the
jobs that name a queue; every other RayJob gets nothing from it: no
annotation, no Event, no run learned.
"""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pydantic

from rayjob_advisor import contract, reasons
from rayjob_advisor.advice import completions, planner, prediction
from rayjob_advisor.advice.features import Features, features_from_rayjob
from rayjob_advisor.advice.prediction import Prediction
from rayjob_advisor.errors import AnnotationError, NoProfileYet, UnpredictableJob, UserError
from rayjob_advisor.kuberay import hooks, spec
from rayjob_advisor.kuberay.cluster import selected_cluster
from rayjob_advisor.kuberay.hooks import Progress
from rayjob_advisor.kuberay.manifest import MergePatch, merge, metadata_patch
from rayjob_advisor.kuberay.rayjob import RayJob
from rayjob_advisor.models.runtime import RELIABLE_EXTRAPOLATION, RuntimeModel
from rayjob_advisor.observations import AcceleratorChoice, Observation
from rayjob_advisor.profiles.store import ProfileSource

ClusterReader = Callable[[str, str], Mapping[str, Any]]
"""(namespace, name) -> the RayCluster a ``clusterSelector`` job names, as the API server has it; raises
``UserError`` when there is none to read (one line naming it), ``RetryableError`` when the API server does not
answer."""


class Policy(pydantic.BaseModel):
    """What the operator's configuration and the job's namespace decide for every job."""

    model_config = pydantic.ConfigDict(frozen=True)

    default_workload: str | None = None
    prices: planner.Prices = planner.Prices()
    namespace_labels: Mapping[str, str] = pydantic.Field(default_factory=dict)
    hooks: frozenset[str] = frozenset()  # configured hooks (see ``hooks``); namespace labels may change them
    progress: Progress | None = None  # where reports go (the ``progress`` hook); None: reporting is off
    max_extrapolation: float = RELIABLE_EXTRAPOLATION  # enforce resizes up to this many x the most profiled workers
    advise_all_jobs: bool = False  # advise every RayJob, not only those that ask (``left_alone``)


class Message(pydantic.BaseModel):
    """One thing to tell the user: an admission warning, and for ``event`` ones a Kubernetes Event."""

    model_config = pydantic.ConfigDict(frozen=True)

    reason: str  # the Event reason (``reasons``)
    text: str
    warning: bool = False
    event: bool = True


class Forecast(pydantic.BaseModel):
    """What the advisor makes of one RayJob that has not started, and everything it writes on it (``patch``)."""

    model_config = pydantic.ConfigDict(frozen=True, arbitrary_types_allowed=True)

    inputs: contract.AdvisorInputs
    job: Features
    profile: str  # its label, as the ``prediction`` annotation names it
    model: RuntimeModel
    choice: AcceleratorChoice  # whose runs the model was fitted on
    prices: planner.Prices
    startup: float  # the job's expected start-up at its own size, seconds
    prediction: Prediction
    plan: planner.Recommendation | None  # with a deadline
    patch: MergePatch
    messages: tuple[Message, ...] = ()
    resized: bool = False
    walltime: float  # expected start-up + upper bound of the job as advised (resized or not), seconds
    left_alone: str | None = None  # why the operator writes no advice on it (then ``patch`` is at most a release)

    def what_if(self, replicas: Sequence[int] = (), gpus: Sequence[float] = ()) -> list[planner.Option]:
        """The job's runtimes and costs at every size the planner considers, or at those asked."""
        return prediction.what_if(self.job, self.model, self.inputs.confidence, self.prices, replicas, gpus)


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


def left_alone(rayjob: RayJob, policy: Policy) -> str | None:
    """Why the operator writes no advice on a RayJob — it does not ask for it, or its mode is ``off`` — or None when
    it advises it. Inputs it cannot parse ask: their error is reported on the job."""
    if not (
        policy.advise_all_jobs or contract.asks_for_advice(rayjob.annotations, rayjob.labels, policy.namespace_labels)
    ):
        return (
            f"it does not ask for advice (docs/scope.md): annotate it (e.g. {contract.WORKLOAD}), or label its "
            f"namespace {contract.MODE}=recommend"
        )
    try:
        off = job_inputs(rayjob, policy).mode == "off"
    except AnnotationError:
        return None
    return f"its mode is off ({contract.MODE})" if off else None


def in_scope(rayjob: RayJob, policy: Policy) -> bool:
    """Whether the operator handles a RayJob at all: one it advises, or one held for it (always released)."""
    return rayjob.hold is not None or rayjob.asks_release or left_alone(rayjob, policy) is None


def guarded(body: Mapping[str, Any], old: Mapping[str, Any] | None, *, by_advisor: bool) -> MergePatch:
    """What the webhook writes on any RayJob's CREATE (``old`` None) or UPDATE: the ``held`` mark, which only the
    advisor writes (``RayJob.admitted``, ``RayJob.kept_held``), so that no tenant makes the controller lift a
    suspension someone else set."""
    if old is None:
        return RayJob(body).admitted()
    return {} if by_advisor else RayJob(body).kept_held(old)


def job_inputs(rayjob: RayJob, policy: Policy) -> contract.AdvisorInputs:
    """A RayJob's parsed advisor inputs, the configured default workload filling in a missing one."""
    inputs = contract.parse_inputs(rayjob.annotations, rayjob.labels, policy.namespace_labels)
    return inputs.model_copy(update={"workload": inputs.workload or policy.default_workload})


def advise(
    body: Mapping[str, Any],
    profiles: ProfileSource,
    *,
    policy: Policy,
    may_resize: bool,
    now: dt.datetime,
    cluster: Mapping[str, Any] | None = None,
    clusters: ClusterReader | None = None,
    creating: bool = False,
) -> Advice:
    """The advisor's changes to one RayJob that has not started (``forecast``; a release only, of a job it leaves
    alone).

    Bad input (a field of the wrong type too, read by type first: ``spec``;
    a ``clusterSelector`` job's missing RayCluster, read with ``clusters``)
    becomes the ``error`` annotation and a warning; a workload with no
    profile yet (``NoProfileYet``) the ``note`` annotation. Raises
    ``ProfileNotReady`` while the profile's first fit is still running (a
    held job stays held until it is done), ``RetryableError`` when
    ``clusters`` cannot reach the API server. ``creating``: the webhook admits the job's CREATE
    (``RayJob.creating``).
    """
    rayjob = RayJob(body, creating)
    if left_alone(rayjob, policy) is not None:
        return Advice(patch=rayjob.release() if may_resize else {})
    inputs = None
    try:
        spec.check(body)
        inputs = job_inputs(rayjob, policy).within_reach(now)
        seen = forecast(
            body,
            profiles,
            policy=policy,
            may_resize=may_resize,
            now=now,
            cluster=cluster,
            clusters=clusters,
            creating=creating,
        )
    except UserError as exc:
        release, workload = rayjob.release() if may_resize else {}, inputs.workload if inputs else None
        answer = _learning if isinstance(exc, NoProfileYet) else _bad_input
        return answer(rayjob, str(exc), release, workload=workload)
    known = {"workload": seen.inputs.workload, "p50": seen.prediction.p50, "walltime": seen.walltime}
    return Advice(patch=seen.patch, messages=seen.messages, resized=seen.resized, **known)


def forecast(
    body: Mapping[str, Any],
    profiles: ProfileSource,
    *,
    policy: Policy,
    may_resize: bool,
    now: dt.datetime,
    cluster: Mapping[str, Any] | None = None,
    clusters: ClusterReader | None = None,
    creating: bool = False,
) -> Forecast:
    """What the advisor makes of one RayJob that has not started, and writes on it (nothing, but the release of a
    held job, on a job the operator leaves alone: ``left_alone`` says why).

    ``may_resize``: KubeRay has not built the cluster yet (admission of a
    CREATE, or a job held for us), so ``enforce`` may resize the scaled group,
    a held job is released — whatever the advice, a RayJob is never left
    waiting for us — and the enabled ``hooks`` carry the expected walltime of
    the job as advised (resized or not) to the schedulers that read it, and
    wire its head pod to report progress. Every input is checked before the
    profile is asked for its model (a fit, for a tool that fits when asked):
    a mistake costs no waiting. Raises ``UserError`` for bad input,
    ``ProfileNotReady`` while the profile's fit is running. ``cluster``: the
    RayCluster a ``clusterSelector`` job runs on, else read with ``clusters``
    (the job is predicted from its groups, never resized: ``kuberay.cluster``). ``creating``: as for ``advise``.
    """
    rayjob = RayJob(body, creating)
    spec.check(body)
    name = selected_cluster(body)
    if cluster is None and clusters is not None and name is not None:
        cluster = clusters(rayjob.namespace, name)
    if cluster is not None:
        spec.check_cluster(cluster, f"RayCluster {RayJob(cluster).metadata.get('name')!r}")
    inputs = job_inputs(rayjob, policy).within_reach(now)
    job = features_from_rayjob(body, inputs, cluster)
    prediction.require_predictable(job)
    fitted = profiles.fitted(rayjob.namespace, inputs.workload, job.accelerator)
    result = prediction.predict(job, fitted.model, fitted.label, inputs.confidence, now, fitted.choice.assumed)
    deadline = rayjob.deadline(inputs, now)  # a duration counts from creation; at admission, from now
    plan = None
    if deadline is not None:
        plan = planner.recommend(job.advice_only(), fitted.model, deadline, now, inputs.confidence, policy.prices)
        plan = _on_shared_cluster(plan, job)
    startup = float(fitted.model.startup([job])[0])
    seen = Forecast(
        inputs=inputs, job=job, profile=fitted.label, model=fitted.model, choice=fitted.choice, prices=policy.prices,
        startup=startup, prediction=result, plan=plan, patch={}, walltime=startup + result.upper,
    )  # fmt: skip
    release = rayjob.release() if may_resize else {}
    alone = left_alone(rayjob, policy)
    if alone is not None:
        return seen.model_copy(update={"patch": release, "plan": None, "left_alone": alone})
    other = fitted.choice.warning(fitted.label)
    heads_up = (Message(reason=reasons.OTHER_ACCELERATOR, text=other, warning=True),) if other else ()
    planned = _planned(seen, rayjob, may_resize=may_resize, now=now, reach=policy.max_extrapolation)
    planned = planned.model_copy(
        update={"patch": merge(planned.patch, release), "messages": (*heads_up, *planned.messages)}
    )
    return _hooked(planned, body, policy) if may_resize else planned


def _planned(seen: Forecast, rayjob: RayJob, *, may_resize: bool, now: dt.datetime, reach: float) -> Forecast:
    """``seen`` with the annotations of its prediction and plan, and in ``enforce`` mode the resize: not to more
    than ``reach`` times the most workers the profile measured (``Policy.max_extrapolation``)."""
    result, plan, job = seen.prediction, seen.plan, seen.job
    notes: dict[str, str | None] = {**result.annotations(), contract.ERROR: None, contract.NOTE: None}
    notes |= {contract.PREDICTED: contract.format_duration(result.p50), contract.DEADLINE_STATUS: "none"}
    if plan is None:
        return seen.model_copy(update={"patch": metadata_patch(notes)})
    enforce = may_resize and seen.inputs.mode == "enforce" and plan.changes
    blocker = (job.enforce_blocker or _beyond_reach(seen, plan, reach)) if enforce else None
    if blocker:
        plan = plan.model_copy(update={"reason": f"{plan.reason}; not resized: {blocker}"})
    notes[contract.RECOMMENDATION] = plan.annotation()
    as_is = None if enforce and not blocker else (seen.startup, result.upper)
    notes[contract.DEADLINE_STATUS] = _deadline_status(plan, now, as_is)
    if enforce and not blocker:
        return _resized(seen.model_copy(update={"plan": plan}), rayjob, notes)
    text = f"recommends {plan.size}: {plan.reason}"
    if blocker:
        message = Message(reason=reasons.NOT_RESIZED, text=text, warning=True)
    else:
        message = Message(reason=reasons.RECOMMENDED, text=text, event=False)
    return seen.model_copy(update={"plan": plan, "patch": metadata_patch(notes), "messages": (message,)})


def _on_shared_cluster(plan: planner.Recommendation, job: Features) -> planner.Recommendation:
    """A plan for a job on an existing RayCluster (``clusterSelector``) says what that cluster would need: advice
    only, as ``enforce`` never resizes a shared cluster (``Features.enforce_blocker``)."""
    if job.cluster is None or job.scale_group is None:
        return plan
    pods = job.with_replicas(plan.replicas).pods
    need = f"this cluster would need {pods} workers ({plan.size} of {plan.group}; the planner's size, not applied)"
    return plan.model_copy(update={"reason": f"{need}: {plan.reason}"})


def _beyond_reach(seen: Forecast, plan: planner.Recommendation, reach: float) -> str | None:
    """Why the plan lies beyond what the profile can vouch for, if it does (``_planned``)."""
    workers, measured = seen.job.with_replicas(plan.replicas).workers, seen.model.max_workers_
    if workers <= reach * measured:
        return None
    return (
        f"its {workers} workers are {workers / measured:.3g}x the most the profile measured ({measured}); "
        f"enforce resizes up to {reach:g}x"
    )


def _resized(seen: Forecast, rayjob: RayJob, notes: dict[str, str | None]) -> Forecast:
    """``seen`` with its plan applied to the scaled group and Ray Train alike, recording what they had before."""
    job, plan = seen.job, seen.plan
    assert job.scale_group is not None and plan is not None  # a plan that changes the size has a group to change
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
    listed = ", ".join(changes[:-1]) + " and " + changes[-1] if len(changes) > 1 else changes[0]
    message = Message(reason=reasons.RESIZED, text=f"set {plan.group} {listed}: {plan.reason}")
    patch = merge(metadata_patch(notes), resize)
    walltime = plan.walltime  # of the size the job now has
    return seen.model_copy(update={"patch": patch, "messages": (message,), "resized": True, "walltime": walltime})


def _hooked(seen: Forecast, body: Mapping[str, Any], policy: Policy) -> Forecast:
    """``seen`` with the writes of the hooks enabled for the job's namespace (the job as advised: a resize replaces
    the group list the hooks add to)."""
    enabled = hooks.enabled(policy.hooks, policy.namespace_labels)
    if not enabled:
        return seen
    advised = merge(copy.deepcopy(dict(body)), seen.patch)
    job = seen.job  # at the size as advised
    if seen.resized and seen.plan and job.scale_group:
        job = job.with_replicas(seen.plan.replicas).with_gpus(seen.plan.gpus_per_worker)
    startup = float(seen.model.startup_upper([job])[0])
    patch = merge(seen.patch, hooks.patch(advised, enabled, seen.walltime, policy.progress, startup))
    if "kuberay" in enabled:  # shown in the recommendation, with or without a plan
        shown = {
            **(seen.plan.fields() if seen.plan else {}),
            "kuberay": hooks.kuberay_advice(advised, seen.walltime, startup),
        }
        merge(patch, metadata_patch({contract.RECOMMENDATION: contract.compact_json(shown)}))
    messages = seen.messages
    if "progress" in enabled and policy.progress is None:
        text = f"{hooks.PROGRESS_OFF}: nothing injected"
        messages = (*messages, Message(reason=reasons.PROGRESS_OFF, text=text, warning=True, event=False))
    return seen.model_copy(update={"patch": patch, "messages": messages})


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


def failed(body: Mapping[str, Any], message: str, *, may_resize: bool) -> Advice:
    """The advice when ``advise`` itself failed (a bug of ours, a value no check caught): the ``error``
    annotation and a warning, the release of a held job — reported on the job, never retried forever."""
    rayjob = RayJob(body)
    return _bad_input(rayjob, message, rayjob.release() if may_resize else {}, workload=None)


def _learning(rayjob: RayJob, message: str, release: MergePatch, workload: str | None) -> Advice:
    """A workload's first jobs (``NoProfileYet``): the ``note`` annotation and a warning, no ``error``; a Normal
    Event only when the note is new."""
    new = rayjob.annotations.get(contract.NOTE) != message
    note = Message(reason=reasons.NO_PROFILE_YET, text=message, event=new)
    patch = merge(metadata_patch({contract.NOTE: message, contract.ERROR: None}), release)
    return Advice(patch=patch, messages=(note,), workload=workload)


def _bad_input(rayjob: RayJob, message: str, release: MergePatch, workload: str | None) -> Advice:
    """The ``error`` annotation and a warning; an Event only when the error is new (no repeats on updates)."""
    new = rayjob.annotations.get(contract.ERROR) != message
    note = Message(reason=reasons.CANNOT_PREDICT, text=message, warning=True, event=new)
    patch = merge(metadata_patch({contract.ERROR: message}), release)
    return Advice(patch=patch, messages=(note,), workload=workload, error=message)


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
        spec.check(body)
    except UnpredictableJob as exc:
        return Lesson(messages=(Message(reason=reasons.CANNOT_LEARN, text=f"{exc}", warning=True),))
    try:
        inputs: contract.AdvisorInputs | None = job_inputs(rayjob, policy)
    except AnnotationError:
        inputs = None
    try:
        job = features_from_rayjob(body, inputs) if inputs is not None and inputs.workload else None
    except (AnnotationError, UnpredictableJob):
        job = None
    try:
        completion = completions.completion(body, job)
        outcome = completions.deadline_outcome(body, inputs) if inputs is not None else None
    except ValueError as exc:
        text = f"finished RayJob has a malformed status: {exc}"
        return Lesson(messages=(Message(reason=reasons.CANNOT_LEARN, text=text, warning=True),))
    messages = () if outcome is None else (_deadline_message(outcome),)
    notes = completion.annotations() | ({contract.DEADLINE_STATUS: outcome.outcome} if outcome else {})
    return Lesson(patch=metadata_patch(notes), messages=messages, completion=completion, deadline=outcome)


def _deadline_message(outcome: completions.DeadlineOutcome) -> Message:
    reason = {"met": reasons.DEADLINE_MET, "missed": reasons.DEADLINE_MISSED, "failed": reasons.DEADLINE_FAILED}
    return Message(reason=reason[outcome.outcome], text=outcome.message(), warning=outcome.outcome != "met")
