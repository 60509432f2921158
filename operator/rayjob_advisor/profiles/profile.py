"""One workload's profile: its runs and, once fitted, its model, as one frozen ``Fit`` record at a time.

A ``Profile`` is changed by its store (its runs: ``ProfileStore.put``) and
by its own fits (each assigned whole): nothing else writes to it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import itertools
import logging
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

from rayjob_advisor import contract, reasons
from rayjob_advisor.models.evaluation import NotEnoughData
from rayjob_advisor.models.runtime import RuntimeModel
from rayjob_advisor.models.transfer import TransferredModel, better_model
from rayjob_advisor.observations import (
    MEASURES,
    AcceleratorChoice,
    Observation,
    choose_accelerator,
    measured_accelerators,
    runs_on,
)
from rayjob_advisor.profiles.codec import MAX_CONDITION_MESSAGE, condition

logger = logging.getLogger(__name__)

MAX_FIT_RUNS = 2048
"""The most runs one fit takes; a profile's runs beyond it are sub-sampled (``fitting_sample``) before the fit.

A fit's cost grows faster than its runs (16,000 runs took 85 s and 453 MiB, in the controller and in every
webhook replica), and the refitter fits one profile at a time, so an unbounded profile would hold up every other
namespace's fits. 2,048 runs fit in about a second (``benchmarks/fitting.py``), and are more than any shipped
profile has (their predictions do not change) and twice what a status keeps of learned runs (``history.MAX_RUNS``).
"""
_NOT_CONFIGURATION = frozenset({*MEASURES, "source"})


def fitting_sample(runs: Sequence[Observation], cap: int = MAX_FIT_RUNS) -> list[Observation]:
    """At most ``cap`` of ``runs``, stratified by configuration and the newest first, in their own order.

    Stratified (rounds of one run of each configuration): a profile of thousands of repeats of a few sizes keeps
    its rare configurations, which decide how far the model reaches (the worker counts and dataset sizes it
    extrapolates to); a uniform sample would drop them. The newest first (the last listed: learned runs follow
    the seed, each list in the order it grew): a workload's code and cluster change, and recent runs are what the
    next job resembles; where configurations outnumber the cap, the most recently run ones are kept. No
    randomness: the controller and every webhook replica fit the same sample, so they predict alike.
    """
    if len(runs) <= cap:
        return list(runs)
    strata: dict[tuple[object, ...], list[int]] = {}
    for index in reversed(range(len(runs))):
        run = runs[index]
        key = tuple(getattr(run, field) for field in Observation.model_fields if field not in _NOT_CONFIGURATION)
        strata.setdefault(key, []).append(index)
    rounds = itertools.chain.from_iterable(itertools.zip_longest(*strata.values()))
    chosen = itertools.islice((index for index in rounds if index is not None), cap)
    return [runs[index] for index in sorted(chosen)]


@dataclasses.dataclass(frozen=True)
class Fit:
    """One fit of a profile's runs, assigned to it whole: what its predictions use until the next one.

    A failed fit keeps the previous fit's model (and its accelerators), and says why.
    """

    version: int  # of the runs fitted (``Profile.version`` when it began)
    at: dt.datetime
    began: float  # time.monotonic() when it began: refits are debounced on it
    seconds: float  # how long it took
    model: RuntimeModel | None  # predicts the runs of ``accelerator``; None: no fit has succeeded yet
    runs: int  # the runs of ``accelerator`` it was fitted from, of which at most ``MAX_FIT_RUNS`` were fitted
    accelerator: str | None  # the most measured accelerator; None: the runs name none
    measured: tuple[str, ...]  # the accelerators of the runs ``model`` was fitted with, the most measured first
    error: str | None  # why it failed; None: it did not
    reason: str | None  # the same as a condition reason: NotEnoughData, FitFailed
    transitioned_at: dt.datetime  # when the outcome (failed or not) last changed


@dataclasses.dataclass(frozen=True)
class AcceleratorFit:
    """The model of one more accelerator's runs in a profile that measured several, fitted once a job asked for it."""

    runs: list[Observation] | None = None  # what ``model`` was fitted on; None: not fitted yet
    model: RuntimeModel | None = None
    error: str | None = None  # why its last fit failed


def _fitted(observations: list[Observation]) -> RuntimeModel:
    """A runtime model of ``observations`` (``fitting_sample``); raises when it cannot be trusted (a non-finite
    error)."""
    model = RuntimeModel().fit(fitting_sample(observations))
    if not math.isfinite(model.cv_mape_):
        raise ValueError(f"the cross-validated error is {model.cv_mape_}")
    return model


class Profile:
    """One workload's runs and, once fitted, its model. ``version`` rises with every change of runs.

    Runs of several accelerators are never mixed in one model: ``model`` is
    that of the most measured accelerator (``accelerator``); the others'
    (``accelerator_fits``) are fitted only once a job asks for one
    (``model_for``), and refitted only when their own runs change (or the
    main model, where theirs is the main one transferred: ``models.transfer``).
    """

    def __init__(
        self,
        namespace: str | None,
        name: str | None,
        workload: str,
        seed: Sequence[Observation],
        learned: Sequence[Observation] = (),
        *,
        generation: int | None = None,
    ) -> None:
        self.namespace, self.name, self.workload = namespace, name, workload
        self._seed, self._learned = list(seed), list(learned)
        self._version = 0
        self._generation = generation  # metadata.generation of the RuntimeProfile the runs were read from
        self._fit: Fit | None = None
        self._published: tuple[bool, dt.datetime] | None = None  # the last published outcome, before any fit here
        self._accelerator_fits: dict[str, AcceleratorFit] = {}

    @property
    def label(self) -> str:
        """``namespace/workload`` for a RuntimeProfile, ``shipped/workload`` for an embedded one."""
        return f"{self.namespace or 'shipped'}/{self.workload}"

    @property
    def seed(self) -> list[Observation]:
        return list(self._seed)

    @property
    def learned(self) -> list[Observation]:
        return list(self._learned)

    @property
    def observations(self) -> list[Observation]:
        return [*self._seed, *self._learned]

    @property
    def version(self) -> int:
        return self._version

    @property
    def generation(self) -> int | None:
        return self._generation

    @property
    def last_fit(self) -> Fit | None:
        return self._fit

    @property
    def fitted_on_current_runs(self) -> bool:
        return self._fit is not None and self._fit.version == self._version

    @property
    def model(self) -> RuntimeModel | None:
        return self._fit.model if self._fit else None

    @property
    def accelerator(self) -> str | None:
        return self._fit.accelerator if self._fit else None

    @property
    def measured(self) -> tuple[str, ...]:
        return self._fit.measured if self._fit else ()

    @property
    def accelerator_fits(self) -> Mapping[str, AcceleratorFit]:
        return dict(self._accelerator_fits)

    def fit(self) -> None:
        """Refit on the current runs (slow: call it off the request path), and the other accelerators' models.

        Never raises: a fit that fails for any reason keeps the previous model
        (if any) and says why in its ``error``.
        """
        version, observations = self._version, self.observations
        began = time.monotonic()
        measured = measured_accelerators(observations)
        main = measured[0] if measured else None
        model, accelerator, error, reason = self.model, self.accelerator, None, None
        runs = runs_on(observations, main)
        try:
            model, accelerator = _fitted(runs), main
        except NotEnoughData as exc:
            error, reason = f"cannot fit {len(observations)} runs: {exc}", reasons.NOT_ENOUGH_DATA
        except Exception as exc:  # numeric garbage, an estimator's bug: this profile's problem only
            logger.warning("the fit of profile %s failed", self.label, exc_info=True)
            error = f"the fit of {len(observations)} runs failed: {type(exc).__name__}: {exc}"
            reason = reasons.FIT_FAILED
        self._fit_accelerators(model, accelerator)
        at = contract.now()
        before = (self._fit.error is None, self._fit.transitioned_at) if self._fit else self._published
        self._fit = Fit(
            version=version,
            at=at,
            began=began,
            seconds=time.monotonic() - began,
            model=model,
            runs=len(runs) if error is None else self._fit.runs if self._fit is not None else 0,
            accelerator=accelerator,
            measured=measured if error is None else self.measured,
            error=error,
            reason=reason,
            transitioned_at=before[1] if before is not None and before[0] == (error is None) else at,
        )

    def choose(self, accelerator: str | None) -> AcceleratorChoice:
        """Whose runs predict a job on ``accelerator`` (its own where measured) as of the last successful fit."""
        return choose_accelerator(self.measured, accelerator)

    def model_for(self, accelerator: str | None) -> tuple[RuntimeModel | None, str | None]:
        """The model of ``accelerator``'s runs (``choose(...).used``), else why there is none: its fit failed
        (the error), or it is due (None: the refitter fits it next, as it does a profile's first fit)."""
        if accelerator is None or accelerator == self.accelerator:
            error = self._fit.error if self._fit is not None and self.model is None else None
            return self.model, error
        fit = self._accelerator_fits.setdefault(accelerator, AcceleratorFit())
        return fit.model, None if fit.model is not None else fit.error

    @property
    def accelerators_due(self) -> bool:
        """Whether a job asked for an accelerator whose model is not fitted yet."""
        return any(fit.runs is None for fit in list(self._accelerator_fits.values()))

    def fit_accelerators(self) -> None:
        """Fit the models of the other accelerators jobs asked for whose runs (or the main model a transfer
        scales) changed: each its own or the main one's transferred (``models.transfer``); never raises."""
        self._fit_accelerators(self.model, self.accelerator)

    def _fit_accelerators(self, main: RuntimeModel | None, main_accelerator: str | None) -> None:
        observations = self.observations
        for accelerator, fit in list(self._accelerator_fits.items()):
            runs = runs_on(observations, accelerator)
            if accelerator == main_accelerator:
                del self._accelerator_fits[accelerator]  # the main model serves it now
            elif not any(run.accelerator == accelerator for run in runs):
                self._accelerator_fits[accelerator] = AcceleratorFit(runs, None, f"no runs on {accelerator} any more")
            elif runs != fit.runs or (isinstance(fit.model, TransferredModel) and fit.model.source is not main):
                try:
                    model = better_model(fitting_sample(runs), accelerator, main, main_accelerator)
                    self._accelerator_fits[accelerator] = AcceleratorFit(runs, model)
                except Exception as exc:  # as in ``fit``: this accelerator's problem only; the previous model stays
                    logger.warning("the fit of profile %s on %s failed", self.label, accelerator, exc_info=True)
                    error = f"the fit of {len(runs)} runs on {accelerator} failed: {type(exc).__name__}: {exc}"
                    self._accelerator_fits[accelerator] = AcceleratorFit(runs, fit.model, error)

    def fit_now(self, accelerator: str | None) -> None:
        """Fit the model a job on ``accelerator`` is predicted from on the caller's thread: for a one-off tool (the
        CLI, the kubectl plugin) that has no refitter to wait for."""
        self.fit()
        self.model_for(self.choose(accelerator).used)  # asks for another accelerator's model, fitted next
        self.fit_accelerators()

    def model_status(self) -> dict[str, object]:
        """What ``status.model`` of the RuntimeProfile shows (``error``: why the last fit failed, else null)."""
        error = self._fit.error[:MAX_CONDITION_MESSAGE] if self._fit and self._fit.error else None
        if self._fit is None or self._fit.model is None:
            return {"name": "none", "samples": len(self.observations), "error": error}
        model = self._fit.model
        return {
            "name": model.selected_,
            "cvError": round(model.cv_mape_, 4),
            "samples": model.n_samples_,
            "fittedAt": contract.format_timestamp(self._fit.at),
            "error": error,
            "accelerator": self.accelerator,
        }

    def fitted_condition(self) -> dict[str, object]:
        """The ``Fitted`` condition of the RuntimeProfile (Kubernetes API conventions), after a fit."""
        fit, model = self._fit, self.model
        error, since = (fit.error, fit.transitioned_at) if fit is not None else ("not fitted", None)
        if error is None and model is not None:
            status, reason = "True", reasons.FITTED
            message = f"{model.selected_} fitted on {model.n_samples_} runs"
            if fit is not None and fit.runs > model.n_samples_:
                message += f" sampled from {fit.runs} (at most {MAX_FIT_RUNS} are fitted)"
        else:
            status, reason = "False", (fit.reason if fit is not None else None) or reasons.FIT_FAILED
            message = error or "not fitted"
            if model is not None:
                message += f"; predictions use the previous fit ({model.selected_})"
        return condition(reasons.FITTED, status, reason, message, since, self._generation)

    def _remember(self, conditions: Sequence[Mapping[str, Any]] | None) -> None:
        """Take the last published ``Fitted`` outcome and its time (after a restart) unless this run fitted already."""
        if self._fit is not None or self._published is not None:
            return
        for entry in conditions or []:
            if (
                isinstance(entry, Mapping)
                and entry.get("type") == reasons.FITTED
                and entry.get("status") in ("True", "False")
            ):
                with contextlib.suppress(TypeError, ValueError):
                    since = contract.parse_timestamp(str(entry["lastTransitionTime"]))
                    self._published = (entry["status"] == "True", since)

    def _replace_runs(self, seed: list[Observation], learned: list[Observation]) -> bool:
        """Take new runs; whether they changed (then the profile is due for a refit)."""
        if (self._seed, self._learned) == (seed, learned):
            return False
        self._seed, self._learned = seed, learned
        self._version += 1
        return True
