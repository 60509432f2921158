"""Runtime profiles: the observations of one workload class, and the model fitted on them."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import logging
import math
import pathlib
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pydantic

from rayjob_advisor import contract
from rayjob_advisor.background import BackgroundLoop
from rayjob_advisor.models.evaluation import NotEnoughData
from rayjob_advisor.models.runtime import RuntimeModel
from rayjob_advisor.models.transfer import TransferredModel, better_model
from rayjob_advisor.observations import (
    AcceleratorChoice,
    Observation,
    choose_accelerator,
    measured_accelerators,
    read_observations,
    runs_on,
)

logger = logging.getLogger(__name__)
SHIPPED_DATA = pathlib.Path(__file__).parent / "data"


class UnknownWorkload(LookupError):
    """No observations exist for the workload a RayJob names."""


def require_workload(workload: str | None) -> str:
    """The workload a RayJob names, which chooses its RuntimeProfile; raises when it names none."""
    if workload is None:
        raise UnknownWorkload(
            f"no workload: set the {contract.WORKLOAD} annotation or label to choose a RuntimeProfile"
        )
    return workload


def shipped_data(workload: str | None) -> pathlib.Path:
    """The embedded default profile: ``data/<workload>.csv``, or the only one when none is named."""
    shipped = {path.stem: path for path in sorted(SHIPPED_DATA.glob("*.csv"))}
    if workload is None and len(shipped) == 1:
        return next(iter(shipped.values()))
    if workload in shipped:
        return shipped[workload]
    known = ", ".join(shipped) or "none"
    if workload is None:
        raise UnknownWorkload(f"name a workload to choose a shipped profile (shipped: {known}) or give --data")
    raise UnknownWorkload(f"no shipped profile for workload {workload!r} (shipped: {known}); give --data FILE.csv")


def workloads(observations: Sequence[Observation]) -> list[str]:
    """The distinct named workloads, sorted."""
    return sorted({o.workload for o in observations if o.workload})


def profile_name(observations: Sequence[Observation], workload: str | None, path: pathlib.Path) -> str:
    """What to call a profile: the workload asked for, else the data's only workload, else the file's name."""
    named = workloads(observations)
    return workload or (named[0] if len(named) == 1 else path.stem)


def observations_for_workload(observations: Sequence[Observation], workload: str | None) -> list[Observation]:
    """The runs a RayJob of ``workload`` is predicted from.

    Runs with no workload column belong to every workload (a single-workload
    file). A file holding several named workloads needs the RayJob to say
    which one it is.
    """
    named = workloads(observations)
    if workload is None:
        if len(named) > 1:
            raise UnknownWorkload(
                f"the data holds several workloads ({', '.join(named)}); "
                "set the rayjob-advisor.io/workload annotation or label to choose one"
            )
        return list(observations)
    if not named:
        return list(observations)
    chosen = [o for o in observations if o.workload in (workload, None)]
    if not any(o.workload == workload for o in chosen):
        raise UnknownWorkload(f"no profile for workload {workload!r}; known workloads: {', '.join(named)}")
    return chosen


API_GROUP = "rayjob-advisor.io"
API_VERSION = f"{API_GROUP}/v1alpha1"
KIND = "RuntimeProfile"

# Observation field -> its camelCase key in RuntimeProfile objects (Kubernetes API conventions).
_K8S_KEYS = {
    "dataset_size": "datasetSize",
    "epochs": "epochs",
    "batch_size": "batchSize",
    "workers": "workers",
    "cpus_per_worker": "cpusPerWorker",
    "gpus_per_worker": "gpusPerWorker",
    "nodes": "nodes",
    "accelerator": "accelerator",
    "execution_seconds": "executionSeconds",
    "startup_seconds": "startupSeconds",
    "source": "source",
}


def observation_to_k8s(observation: Observation) -> dict[str, object]:
    """One observation as it is stored in a RuntimeProfile; unknown fields left out."""
    values = observation.model_dump()
    return {key: values[field] for field, key in _K8S_KEYS.items() if values[field] is not None}


def observation_from_k8s(workload: str, item: dict[str, object]) -> Observation:
    """The inverse of ``observation_to_k8s``, validated like a CSV row."""
    fields = {field: item[key] for field, key in _K8S_KEYS.items() if key in item}
    return Observation.model_validate({"workload": workload, **fields})


def observations_from_k8s(workload: str, items: Sequence[dict[str, object]] | None) -> list[Observation]:
    """A RuntimeProfile's list of observations (``spec`` or ``status``)."""
    return [observation_from_k8s(workload, item) for item in items or []]


class BadProfile(ValueError):
    """A RuntimeProfile the operator cannot use (no workload, an invalid observation, not an object)."""


def runs_from_k8s(
    spec: Mapping[str, Any] | None, status: Mapping[str, Any] | None
) -> tuple[str, list[Observation], list[Observation]]:
    """A RuntimeProfile's workload, its seed runs (``spec``) and learned runs (``status``). Raises ``BadProfile``."""
    try:
        if not isinstance(spec, Mapping) or not isinstance(spec.get("workload"), str) or not spec["workload"]:
            raise BadProfile("spec.workload is missing: the profile names no workload")
        workload = spec["workload"]
        seed = observations_from_k8s(workload, spec.get("observations"))
        learned = observations_from_k8s(workload, (status or {}).get("observations"))
    except (pydantic.ValidationError, TypeError, AttributeError) as exc:
        raise BadProfile(f"an observation is invalid: {exc}") from exc
    return workload, seed, learned


def resource_name(workload: str) -> str:
    """A DNS-1123 object name for a workload class (lower case, '-' for anything else)."""
    name = re.sub(r"[^a-z0-9-]+", "-", workload.lower()).strip("-")[:63].strip("-")
    return name or "profile"


def runtime_profile_manifest(workload: str, observations: Sequence[Observation]) -> dict[str, object]:
    """A RuntimeProfile (DESIGN §4) seeded with ``observations``, ready for ``kubectl apply``."""
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": resource_name(workload)},
        "spec": {"workload": workload, "observations": [observation_to_k8s(o) for o in observations]},
    }


@dataclasses.dataclass
class AcceleratorFit:
    """The model of one more accelerator's runs in a profile that measured several, fitted once a job asked for it."""

    runs: list[Observation] | None = None  # what ``model`` was fitted on; None: not fitted yet
    model: RuntimeModel | None = None
    error: str | None = None  # why its last fit failed


def _fitted(observations: list[Observation]) -> RuntimeModel:
    """A runtime model of ``observations``; raises when it cannot be trusted (a non-finite error)."""
    model = RuntimeModel().fit(observations)
    if not math.isfinite(model.cv_mape_):
        raise ValueError(f"the cross-validated error is {model.cv_mape_}")
    return model


@dataclasses.dataclass
class Profile:
    """One workload's runs and, once fitted, its model. ``version`` rises with every change of runs.

    Runs of several accelerators are never mixed in one model: ``model`` is
    that of the most measured accelerator (``accelerator``); the others'
    (``accelerator_fits``) are fitted only once a job asks for one
    (``model_for``), and refitted only when their own runs change (or the
    main model, where theirs is the main one transferred: ``models.transfer``).
    """

    namespace: str | None
    name: str | None
    workload: str
    seed: list[Observation]
    learned: list[Observation] = dataclasses.field(default_factory=list)
    version: int = 0
    model: RuntimeModel | None = None
    fitted_version: int = -1
    fitted_at: dt.datetime | None = None
    fit_error: str | None = None
    fit_reason: str | None = None  # why the last fit failed, as a condition reason: NotEnoughData, FitFailed
    generation: int | None = None  # metadata.generation of the RuntimeProfile the runs were read from
    fitted_ok: bool | None = None  # the last fit's outcome; None before the first one
    transitioned_at: dt.datetime | None = None  # when ``fitted_ok`` last changed
    fit_began: float | None = None  # time.monotonic() when the last fit began: refits are debounced on it
    fit_seconds: float | None = None  # how long the last fit took
    wanted: bool = True  # fitted when stale; a shipped profile only once a job asked for it (``ProfileStore.find``)
    accelerator: str | None = None  # the accelerator ``model`` predicts; None: the runs name none
    measured: tuple[str, ...] = ()  # the accelerators of the runs ``model`` was fitted with, the most measured first
    accelerator_fits: dict[str, AcceleratorFit] = dataclasses.field(default_factory=dict)

    @property
    def label(self) -> str:
        """``namespace/workload`` for a RuntimeProfile, ``shipped/workload`` for an embedded one."""
        return f"{self.namespace or 'shipped'}/{self.workload}"

    @property
    def observations(self) -> list[Observation]:
        return [*self.seed, *self.learned]

    def fit(self) -> None:
        """Refit on the current runs (slow: call it off the request path).

        Never raises: a fit that fails for any reason keeps the previous model
        (if any) and says why in ``fit_error``.
        """
        version, observations = self.version, self.observations
        self.fit_began = began = time.monotonic()
        measured = measured_accelerators(observations)
        main = measured[0] if measured else None
        try:
            model = _fitted(runs_on(observations, main))
            self.model, self.fit_error, self.fit_reason = model, None, None
            self.accelerator, self.measured = main, measured
        except NotEnoughData as exc:
            self.fit_error, self.fit_reason = f"cannot fit {len(observations)} runs: {exc}", "NotEnoughData"
        except Exception as exc:  # numeric garbage, an estimator's bug: this profile's problem only
            logger.warning("the fit of profile %s failed", self.label, exc_info=True)
            self.fit_error = f"the fit of {len(observations)} runs failed: {type(exc).__name__}: {exc}"
            self.fit_reason = "FitFailed"
        self.fit_accelerators()
        self.fit_seconds = time.monotonic() - began
        self.fitted_version = version
        self.fitted_at = dt.datetime.now(dt.UTC).replace(microsecond=0)
        ok = self.fit_error is None
        if ok != self.fitted_ok:
            self.fitted_ok, self.transitioned_at = ok, self.fitted_at

    def choose(self, accelerator: str | None) -> AcceleratorChoice:
        """Whose runs predict a job on ``accelerator`` (its own where measured) as of the last successful fit."""
        return choose_accelerator(self.measured, accelerator)

    def model_for(self, accelerator: str | None) -> tuple[RuntimeModel | None, str | None]:
        """The model of ``accelerator``'s runs (``choose(...).used``), else why there is none: its fit failed
        (the error), or it is due (None: the refitter fits it next, as it does a profile's first fit)."""
        if accelerator is None or accelerator == self.accelerator:
            return self.model, None if self.model is not None else self.fit_error
        fit = self.accelerator_fits.setdefault(accelerator, AcceleratorFit())
        return fit.model, None if fit.model is not None else fit.error

    @property
    def accelerators_due(self) -> bool:
        """Whether a job asked for an accelerator whose model is not fitted yet."""
        return any(fit.runs is None for fit in list(self.accelerator_fits.values()))

    def fit_accelerators(self) -> None:
        """Fit the models of the other accelerators jobs asked for whose runs (or the main model a transfer
        scales) changed: each its own or the main one's transferred (``models.transfer``); never raises."""
        observations = self.observations
        for accelerator, fit in list(self.accelerator_fits.items()):
            runs = runs_on(observations, accelerator)
            if accelerator == self.accelerator:
                del self.accelerator_fits[accelerator]  # the main model serves it now
            elif not any(run.accelerator == accelerator for run in runs):
                fit.runs, fit.model, fit.error = runs, None, f"no runs on {accelerator} any more"
            elif runs != fit.runs or (isinstance(fit.model, TransferredModel) and fit.model.source is not self.model):
                fit.runs = runs
                try:
                    fit.model, fit.error = better_model(runs, accelerator, self.model, self.accelerator), None
                except Exception as exc:  # as in ``fit``: this accelerator's problem only; the previous model stays
                    logger.warning("the fit of profile %s on %s failed", self.label, accelerator, exc_info=True)
                    fit.error = f"the fit of {len(runs)} runs on {accelerator} failed: {type(exc).__name__}: {exc}"

    def fit_now(self, accelerator: str | None) -> None:
        """Fit the model a job on ``accelerator`` is predicted from on the caller's thread: for a one-off tool (the
        kubectl plugin) that has no refitter to wait for."""
        self.fit()
        self.model_for(self.choose(accelerator).used)  # asks for another accelerator's model, fitted next
        self.fit_accelerators()

    def model_status(self) -> dict[str, object]:
        """What ``status.model`` of the RuntimeProfile shows (``error``: why the last fit failed, else null)."""
        if self.model is None:
            return {"name": "none", "samples": len(self.observations), "error": self.fit_error}
        return {
            "name": self.model.selected_,
            "cvError": round(self.model.cv_mape_, 4),
            "samples": self.model.n_samples_,
            "fittedAt": _timestamp(self.fitted_at),
            "error": self.fit_error,
            "accelerator": self.accelerator,
        }

    def remember(self, conditions: Sequence[Mapping[str, Any]] | None) -> None:
        """Take the last published ``Fitted`` outcome and its time (after a restart) unless this run fitted already."""
        if self.fitted_ok is not None:
            return
        for entry in conditions or []:
            if (
                isinstance(entry, Mapping)
                and entry.get("type") == "Fitted"
                and entry.get("status") in ("True", "False")
            ):
                with contextlib.suppress(TypeError, ValueError):
                    since = contract.parse_timestamp(str(entry["lastTransitionTime"]))
                    self.fitted_ok, self.transitioned_at = entry["status"] == "True", since

    def fitted_condition(self) -> dict[str, object]:
        """The ``Fitted`` condition of the RuntimeProfile (Kubernetes API conventions), after a fit."""
        if self.fit_error is None and self.model is not None:
            status, reason = "True", "Fitted"
            message = f"{self.model.selected_} fitted on {self.model.n_samples_} runs"
        else:
            status, reason = "False", self.fit_reason or "FitFailed"
            message = self.fit_error or "not fitted"
            if self.model is not None:
                message += f"; predictions use the previous fit ({self.model.selected_})"
        return condition("Fitted", status, reason, message, self.transitioned_at or self.fitted_at, self.generation)


def _timestamp(moment: dt.datetime | None) -> str | None:
    return moment.isoformat().replace("+00:00", "Z") if moment else None


def condition(
    kind: str, status: str, reason: str, message: str, since: dt.datetime | None, generation: int | None
) -> dict[str, object]:
    """One entry of ``status.conditions``: type, status, reason, message, lastTransitionTime, observedGeneration."""
    since = since or dt.datetime.now(dt.UTC).replace(microsecond=0)
    result: dict[str, object] = {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message[:MAX_CONDITION_MESSAGE],
        "lastTransitionTime": _timestamp(since),
    }
    if generation is not None:
        result["observedGeneration"] = generation
    return result


MAX_CONDITION_MESSAGE = 4000


class ProfileStore:
    """The profiles the operator predicts from: RuntimeProfile objects, then the shipped defaults.

    Namespaces are a trust boundary. A RayJob uses the profile of its
    workload in its own namespace, else one in a namespace the configuration
    names as shared (``shared_namespaces``, first listed first), else the
    shipped profile of that name; never one in another team's namespace.
    """

    def __init__(self, shipped: bool = True, shared_namespaces: Sequence[str] = ()) -> None:
        self._profiles: dict[tuple[str | None, str], Profile] = {}
        self._lock = threading.Lock()
        self.shared_namespaces = tuple(dict.fromkeys(shared_namespaces))
        if shipped:
            for path in sorted(SHIPPED_DATA.glob("*.csv")):
                seed = read_observations(path)[0]
                self._profiles[(None, path.stem)] = Profile(None, None, path.stem, seed, wanted=False)

    def put(
        self, namespace: str, name: str, workload: str, seed: list[Observation], learned: list[Observation]
    ) -> Profile:
        """Record a RuntimeProfile's runs; a change of runs makes the profile due for a refit."""
        with self._lock:
            profile = self._profiles.get((namespace, workload))
            if profile is None:
                profile = self._profiles[(namespace, workload)] = Profile(namespace, name, workload, seed, learned)
            elif (profile.seed, profile.learned) != (seed, learned):
                profile.seed, profile.learned = seed, learned
                profile.version += 1
            return profile

    def remove(self, namespace: str, workload: str) -> None:
        with self._lock:
            self._profiles.pop((namespace, workload), None)

    def visible_from(self, namespace: str) -> tuple[str | None, ...]:
        """Where a RayJob in ``namespace`` may find its profile, in order: its own, the shared ones, shipped."""
        return (namespace, *(shared for shared in self.shared_namespaces if shared != namespace), None)

    def find(self, namespace: str, workload: str) -> Profile:
        """The profile a RayJob of ``workload`` in ``namespace`` is predicted from and learns with.

        The first of ``visible_from(namespace)`` that holds one, whatever its
        fit state: an own-namespace profile still being fitted is the job's
        profile (the caller waits for its fit), it never falls back on a
        shared or shipped one meanwhile. Profiles in other namespaces are
        never used. A shipped profile found here is due for its first fit:
        fitting all of them at start-up would hold the CPU for seconds.
        """
        with self._lock:
            for place in self.visible_from(namespace):
                profile = self._profiles.get((place, workload))
                if profile is not None:
                    profile.wanted = True
                    return profile
            visible = set(self.visible_from(namespace))
            known = ", ".join(sorted({w for ns, w in self._profiles if ns in visible})) or "none"
        shared = ", ".join(self.shared_namespaces)
        where = f"namespace {namespace!r}" + (f" or the shared namespaces ({shared})" if shared else "")
        raise UnknownWorkload(
            f"no RuntimeProfile for workload {workload!r} in {where} and no shipped profile of that name "
            f"(known workloads: {known})"
        )

    def stale(self) -> list[Profile]:
        """Profiles whose runs changed since their last fit (shipped ones once a job asked for them), and those
        with an accelerator a job asked for to fit."""
        with self._lock:
            return [
                p for p in self._profiles.values() if (p.wanted and p.fitted_version != p.version) or p.accelerators_due
            ]


REFIT_DUTY = 0.1  # a profile's refits take at most this share of the time while its runs keep changing


class Refitter(BackgroundLoop):
    """Fits stale profiles in one background loop, so no request ever waits for a fit.

    ``on_fitted`` publishes each new fit (e.g. to the RuntimeProfile's status).
    Refits are debounced: a profile is fitted at most once per ``interval``
    seconds, and at most once per ``1 / duty`` times its last fit's
    duration (fitting takes at most about a tenth of the refitter's time
    while runs keep coming), so a burst of learned runs costs one fit per
    such gap, on all of the runs appended meanwhile (``fits`` counts them).
    No exception of a fit or a publication ends the loop; ``problem`` says
    when it is dead anyway, or stuck (``stuck_after`` seconds without a
    progress while profiles wait for a fit).
    """

    def __init__(
        self,
        store: ProfileStore,
        on_fitted: Callable[[Profile], None],
        interval: float,
        stuck_after: float | None = None,
        duty: float = REFIT_DUTY,
    ) -> None:
        super().__init__("refit", interval, stuck_after)
        self.store = store
        self.on_fitted = on_fitted
        self.duty = duty
        self.fits = 0

    def waiting(self) -> str | None:
        stale = self.store.stale()
        return f"{len(stale)} profiles are stale" if stale else None

    def step(self) -> float:
        """Fit the stale profiles whose debounce gap has passed; returns how soon the next one's ends."""
        wait = self.interval
        for profile in self.store.stale():
            if profile.fitted_version == profile.version:  # only accelerators jobs wait for: no debouncing
                profile.fit_accelerators()
                self.beat()
                continue
            since = time.monotonic() - (profile.fit_began if profile.fit_began is not None else -math.inf)
            gap = max(self.interval, (profile.fit_seconds or 0.0) / self.duty)
            if since < gap:  # fitted a moment ago: coalesce with the changes still to come
                wait = min(wait, gap - since)
                continue
            self._refit(profile)
        return wait

    def _refit(self, profile: Profile) -> None:
        profile.fit()
        self.fits += 1
        self.beat()
        try:
            self.on_fitted(profile)
        except Exception:  # a failed publication must not stop future fits
            logger.exception("could not publish the fit of profile %s", profile.label)
        self.beat()
