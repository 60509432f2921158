"""The bounded history of learned runs in a RuntimeProfile's status, whatever the number of finished jobs.

``status.observations`` keeps the latest ``WINDOW`` raw runs of each
configuration (the fields of ``CONFIGURATION_KEYS``; at most ``MAX_RUNS`` in
all, the oldest go first); models are fitted on them. ``status.summaries``
keeps, per configuration, the count, mean and variance (Welford's update) of
the execution and start-up seconds of *every* learned run, so nothing is lost
statistically when a run leaves the window (at most ``MAX_SUMMARIES``
configurations, the least recently run go first). ``status.learnedSources``
keeps the keys (``rayjob:<uid>:<attempt>``) of the last ``MAX_SOURCES``
learned runs: exactly-once learning looks a key up there and among the kept
runs, so a completion is recognised as learned until ``MAX_SOURCES`` later
ones have been learned.

Items are the RuntimeProfile's own camelCase dictionaries (``codec.observation_to_k8s``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from rayjob_advisor import observations
from rayjob_advisor.profiles.codec import K8S_KEYS

WINDOW = 8
MAX_RUNS = 1024
MAX_SUMMARIES = 512
MAX_SOURCES = 2000
MEASURES: tuple[str, ...] = tuple(K8S_KEYS[field] for field in observations.MEASURES)
CONFIGURATION_KEYS: tuple[str, ...] = tuple(key for key in K8S_KEYS.values() if key not in (*MEASURES, "source"))


def configuration(item: Mapping[str, Any]) -> dict[str, Any]:
    """A run's configuration: the keys of ``CONFIGURATION_KEYS`` it has."""
    return {key: item[key] for key in CONFIGURATION_KEYS if item.get(key) is not None}


def _key(config: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(config.get(key) for key in CONFIGURATION_KEYS)


def welford(stats: Mapping[str, Any] | None, value: float) -> dict[str, float]:
    """``stats`` (count, mean, population variance) with one more value."""
    count = int((stats or {}).get("count", 0))
    mean = float((stats or {}).get("mean", 0.0))
    m2 = float((stats or {}).get("variance", 0.0)) * count
    count += 1
    delta = value - mean
    mean += delta / count
    m2 += delta * (value - mean)
    return {"count": count, "mean": mean, "variance": max(m2 / count, 0.0)}


@dataclasses.dataclass
class History:
    """The learned part of a RuntimeProfile's status: kept runs, per-configuration summaries, learned keys."""

    observations: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    summaries: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    sources: list[str] = dataclasses.field(default_factory=list)

    @classmethod
    def from_status(cls, status: Mapping[str, Any] | None) -> History:
        """The history in ``status``; one written before summaries existed is summarised and bounded first."""
        status = status or {}
        runs = [dict(item) for item in status.get("observations") or []]
        if "summaries" in status:
            return cls(runs, [dict(s) for s in status.get("summaries") or []], list(status.get("learnedSources") or []))
        history = cls()  # legacy: every run ever learned is still there; summarise them all, then keep a window
        for item in runs:
            history.add(item)
        return history

    def knows(self, source: str | None) -> bool:
        """Whether the run of ``source`` was learned already (as far as the bounded keys remember)."""
        if source is None:
            return False
        return source in self.sources or any(item.get("source") == source for item in self.observations)

    def add(self, item: Mapping[str, Any]) -> None:
        """Learn one run: keep it in its configuration's window, update its summary, remember its key."""
        config = configuration(item)
        key = _key(config)
        self.observations.append(dict(item))
        same = [i for i, run in enumerate(self.observations) if _key(configuration(run)) == key]
        dropped = set(same[:-WINDOW])
        self.observations = [run for i, run in enumerate(self.observations) if i not in dropped][-MAX_RUNS:]
        self._summarise(config, key, item)
        source = item.get("source")
        if isinstance(source, str):
            self.sources = [*self.sources, source][-MAX_SOURCES:]

    def _summarise(self, config: dict[str, Any], key: tuple[Any, ...], item: Mapping[str, Any]) -> None:
        found = next((s for s in self.summaries if _key(s.get("configuration") or {}) == key), None)
        summary: dict[str, Any] = found or {"configuration": config}
        if found is not None:
            self.summaries.remove(found)
        for measure in MEASURES:
            value = item.get(measure)
            if isinstance(value, int | float):
                summary[measure] = welford(summary.get(measure), float(value))
        summary["count"] = int(summary.get("count", 0)) + 1
        self.summaries = [*self.summaries, summary][-MAX_SUMMARIES:]  # the least recently run go first

    def status(self) -> dict[str, Any]:
        """The status fields this history is stored in (a merge patch replaces each list whole)."""
        return {"observations": self.observations, "summaries": self.summaries, "learnedSources": self.sources}


def summarise(items: Sequence[Mapping[str, Any]]) -> History:
    """The history of learning ``items`` in order (tests, the benchmark)."""
    history = History()
    for item in items:
        history.add(item)
    return history
