"""The profiles the operator predicts from, where a job finds its own, and what is left to fit and publish.

What is left to publish (a fit a following replica made, a RuntimeProfile's
new generation) is the store's business, not the profile's.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from rayjob_advisor import contract, reasons
from rayjob_advisor.errors import DuplicateWorkload, NoProfileYet, ProfileNotReady, UnknownWorkload
from rayjob_advisor.models.runtime import RuntimeModel
from rayjob_advisor.observations import AcceleratorChoice, Observation, read_observations
from rayjob_advisor.profiles.profile import Profile
from rayjob_advisor.profiles.shipped import SHIPPED_DATA


def require_workload(workload: str | None) -> str:
    """The workload a RayJob names, which chooses its RuntimeProfile; raises when it names none."""
    if workload is None:
        raise UnknownWorkload(
            f"no workload: set the {contract.WORKLOAD} annotation or label to choose a RuntimeProfile"
        )
    return workload


@dataclasses.dataclass(frozen=True)
class FittedProfile:
    """The profile a job is predicted from (its ``label``, as the ``prediction`` annotation names it), the model of
    its runs on the job's accelerator or the stand-in's, and which of them (``choice``)."""

    label: str
    model: RuntimeModel
    choice: AcceleratorChoice


@dataclasses.dataclass(frozen=True)
class _Claim:
    """One RuntimeProfile naming a workload in its namespace, with its runs (kept for when it comes to own it)."""

    created: str  # metadata.creationTimestamp (RFC 3339 in UTC: orders as text); "" when unknown
    name: str
    seed: list[Observation]
    learned: list[Observation]
    generation: int | None
    conditions: Sequence[Mapping[str, Any]] | None


class ProfileSource(Protocol):
    """Where a forecast takes a job's profile from: the operator's store, or the CLI's file of runs."""

    def fitted(self, namespace: str, workload: str | None, accelerator: str | None) -> FittedProfile: ...


class ProfileStore:
    """The profiles the operator predicts from: RuntimeProfile objects, then the shipped defaults.

    Namespaces are a trust boundary. A RayJob uses the profile of its
    workload in its own namespace, else one in a namespace the configuration
    names as shared (``shared_namespaces``, first listed first), else the
    shipped profile of that name; never one in another team's namespace.

    One workload has one profile in a namespace: of several RuntimeProfiles
    naming it, the oldest (then the first by name) is used, the others are
    refused (``DuplicateWorkload``) until it is gone; none overwrites another.

    The operator's refitter fits stale profiles in the background; a one-off
    tool without one (the CLI, the kubectl plugin) asks for ``fits_when_asked``.
    """

    def __init__(
        self, shipped: bool = True, shared_namespaces: Sequence[str] = (), *, fits_when_asked: bool = False
    ) -> None:
        self._profiles: dict[tuple[str | None, str], Profile] = {}
        self._claims: dict[tuple[str, str], dict[str, _Claim]] = {}  # (namespace, workload) -> name -> its claim
        self._lock = threading.Lock()
        self._republish: set[tuple[str | None, str]] = set()  # fitted on their runs, but to be fitted and published
        self._unpublished: set[tuple[str | None, str]] = set()  # fits this replica left to the leader
        self._shipped = {path.stem: path for path in sorted(SHIPPED_DATA.glob("*.csv"))} if shipped else {}
        self.shared_namespaces = tuple(dict.fromkeys(shared_namespaces))
        self.fits_when_asked = fits_when_asked

    def put(
        self,
        namespace: str,
        name: str,
        workload: str,
        seed: list[Observation],
        learned: list[Observation],
        *,
        generation: int | None = None,
        conditions: Sequence[Mapping[str, Any]] | None = None,
        created: str | None = None,
    ) -> Profile:
        """Record a RuntimeProfile's runs (its ``generation``, published ``conditions`` and ``created`` time, if
        given). Raises ``DuplicateWorkload`` for a profile of a workload an older one in its namespace names.

        A change of runs makes the profile due for a refit; so does, on the
        same runs, a new generation or a fit this replica left unpublished
        (``left_unpublished``): its outcome is published again.
        """
        key = (namespace, workload)
        with self._lock:
            left = [other for (place, other), claims in self._claims.items() if place == namespace and name in claims]
        for other in left:
            if other != workload:  # its workload changed: it leaves the old one to the next oldest
                self.remove(namespace, name, other)
        with self._lock:
            claims = self._claims.setdefault(key, {})
            claims[name] = _Claim(created or "", name, seed, learned, generation, conditions)
            owner = min(claims.values(), key=lambda claim: (claim.created, claim.name))
            if owner.name != name:
                raise DuplicateWorkload(
                    f"RuntimeProfile {owner.name} names workload {workload!r} in namespace {namespace} too, and is "
                    f"older: it is the one used; delete one of them"
                )
            profile = self._profiles.get(key)
            if profile is None or profile.name != name:  # a first one, or an older one than seen before
                profile = self._profiles[key] = Profile(namespace, name, workload, seed, learned, generation=generation)
            else:
                profile._replace_runs(seed, learned)
                if generation is not None and generation != profile.generation:
                    profile._generation = generation
                    self._republish.add(key)
            if key in self._unpublished:
                self._unpublished.discard(key)
                self._republish.add(key)
            profile._remember(conditions)
            return profile

    def left_unpublished(self, profile: Profile) -> None:
        """A fit this (following) replica did not publish: published once its RuntimeProfile is seen again."""
        with self._lock:
            self._unpublished.add((profile.namespace, profile.workload))

    def remove(self, namespace: str, name: str, workload: str) -> None:
        """Forget RuntimeProfile ``name``; if it was its workload's, the next oldest that names it takes over."""
        key = (namespace, workload)
        with self._lock:
            claims = self._claims.get(key, {})
            claims.pop(name, None)
            profile = self._profiles.get(key)
            if profile is not None and profile.name != name:
                return
            self._profiles.pop(key, None)
            if not claims:
                self._claims.pop(key, None)
                return
        heir = min(claims.values(), key=lambda claim: (claim.created, claim.name))
        self.put(
            namespace, heir.name, workload, heir.seed, heir.learned, generation=heir.generation, created=heir.created
        )

    def visible_from(self, namespace: str) -> tuple[str | None, ...]:
        """Where a RayJob in ``namespace`` may find its profile, in order: its own, the shared ones, shipped."""
        return (namespace, *(shared for shared in self.shared_namespaces if shared != namespace), None)

    def find(self, namespace: str, workload: str) -> Profile:
        """The profile a RayJob of ``workload`` in ``namespace`` is predicted from and learns with.

        The first of ``visible_from(namespace)`` that holds one, whatever its
        fit state: an own-namespace profile still being fitted is the job's
        profile (the caller waits for its fit), it never falls back on a
        shared or shipped one meanwhile. Profiles in other namespaces are
        never used. A shipped profile is read once a job asks for it, and is
        then due for its first fit: reading and fitting all of them at
        start-up would hold the CPU for seconds.
        """
        with self._lock:
            for place in self.visible_from(namespace):
                profile = self._profiles.get((place, workload))
                if profile is None and place is None and workload in self._shipped:
                    seed = read_observations(self._shipped[workload])[0]  # read once a job asks for it
                    profile = self._profiles[(None, workload)] = Profile(None, None, workload, seed)
                if profile is not None:
                    return profile
            visible = set(self.visible_from(namespace))
            known = ", ".join(sorted({w for ns, w in self._profiles if ns in visible} | set(self._shipped))) or "none"
        shared = ", ".join(self.shared_namespaces)
        where = f"namespace {namespace!r}" + (f" or the shared namespaces ({shared})" if shared else "")
        raise NoProfileYet(
            f"no profile yet for workload {workload!r}: no RuntimeProfile in {where} and no shipped profile of that "
            f"name (known workloads: {known}); it is learned from this workload's finished jobs"
        )

    def fitted(self, namespace: str, workload: str | None, accelerator: str | None) -> FittedProfile:
        """The job's profile and the model of its accelerator's runs (or the stand-in's); a failed fit is the
        user's problem to see, a running one (or one of an accelerator no job asked for before) is not:
        ``ProfileNotReady``, unless this store ``fits_when_asked``."""
        profile = self.find(namespace, require_workload(workload))
        if self.fits_when_asked:
            profile.fit_now(accelerator)
        choice = profile.choose(accelerator)
        model, error = profile.model_for(choice.used)
        if model is None:
            fit = profile.last_fit
            learning = profile.namespace == namespace and fit is not None and fit.reason == reasons.NOT_ENOUGH_DATA
            if error and learning:  # its own profile, which its finished jobs fill
                raise NoProfileYet(
                    f"profile {profile.label}: {error}; it is learned from this workload's finished jobs"
                )
            if error:
                raise UnknownWorkload(f"profile {profile.label}: {error}")
            raise ProfileNotReady(
                f"profile {profile.label} is being fitted" + (f" on {choice.used}" if choice.used else "")
            )
        return FittedProfile(profile.label, model, choice)

    def stale(self) -> list[Profile]:
        """Profiles due for a fit (``fit_due``), and those with an accelerator a job asked for to fit."""
        with self._lock:
            return [p for key, p in self._profiles.items() if self._due(key, p) or p.accelerators_due]

    def fit_due(self, profile: Profile) -> bool:
        """Whether ``profile`` is due for a fit of its own: its runs changed since its last one, or its outcome
        is to be published again."""
        with self._lock:
            return self._due((profile.namespace, profile.workload), profile)

    def _due(self, key: tuple[str | None, str], profile: Profile) -> bool:
        return not profile.fitted_on_current_runs or key in self._republish

    def refit(self, profile: Profile) -> None:
        """Fit ``profile`` now (off the request path); its outcome is then up to date to publish."""
        with self._lock:
            self._republish.discard((profile.namespace, profile.workload))
        profile.fit()
