"""One measured training run, and the CSV files that hold many of them.

The CSV is the exchange format between the profiling harness, the operator's
history of finished jobs and the model engine, so its header is user-facing:
the column names in ``CSV_COLUMNS`` are fixed: ``Observation``'s fields, in
order (the RuntimeProfile's keys are theirs too, in camelCase:
``profiles.codec``). Only ``dataset_size``, ``workers`` and
``execution_seconds`` are required; an empty cell means "unknown" and the
model engine applies the defaults documented on ``Observation``. Lines
starting with ``#`` before the header are comments (provenance: where and
how the runs were measured).
"""

from __future__ import annotations

import collections
import csv
import dataclasses
import os
import pathlib
from collections.abc import Iterable, Sequence
from typing import Any

import pydantic

from rayjob_advisor import contract
from rayjob_advisor.errors import ObservationsError

MIN_EXECUTION_SECONDS = 0.001
"""A shorter run is a measurement error (and its logarithm upsets the fit): rejected like a negative one."""
CONFIGURATION_FIELDS: tuple[str, ...] = (
    "workload", "dataset_size", "epochs", "batch_size", "workers", "cpus_per_worker", "gpus_per_worker",
    "accelerator",
)  # fmt: skip


def canonical_accelerator(value: Any) -> Any:
    """An accelerator field's value as its canonical name: runs of ``A100`` and of ``NVIDIA-A100-SXM4-80GB`` are
    runs of one accelerator, ``a100`` (a validator of every model with an ``accelerator``)."""
    if isinstance(value, str):
        canonical = contract.canonical_accelerator(value)
        if not canonical:
            raise ValueError(f"{value!r} names no accelerator")
        return canonical
    return value


class Observation(pydantic.BaseModel):
    """One run. Unknown (``None``) fields get the defaults below when modelled.

    - ``epochs``: 1 — the run is one pass over ``dataset_size`` samples.
    - ``batch_size`` (global): the same per-worker batch in every run of the
      profile, i.e. steps scale as samples / workers.
    - ``cpus_per_worker``: 1; ``gpus_per_worker``: 0.
    - ``nodes``: 1 — all workers on one machine.
    - ``node_cpus`` (the CPUs of the node with the most of the run's
      workers): the profile's where its runs recorded it, else unknown — a
      model then assumes no CPU worker waits for a core (``design.crowding``).
    - ``accelerator`` (canonical, ``contract.canonical_accelerator``): the run
      belongs to every accelerator (``runs_on``).
    """

    model_config = pydantic.ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    workload: str | None = None
    dataset_size: pydantic.PositiveInt
    epochs: pydantic.PositiveInt | None = None
    batch_size: pydantic.PositiveInt | None = None
    workers: pydantic.PositiveInt
    cpus_per_worker: pydantic.PositiveFloat | None = None
    gpus_per_worker: pydantic.NonNegativeFloat | None = None
    nodes: pydantic.PositiveInt | None = None
    accelerator: str | None = None
    node_cpus: pydantic.PositiveFloat | None = None
    execution_seconds: float = pydantic.Field(ge=MIN_EXECUTION_SECONDS)
    startup_seconds: pydantic.NonNegativeFloat | None = None
    source: str | None = None

    @classmethod
    def measured(cls, configuration: object, **measurements: Any) -> Observation:
        """A run of ``configuration`` (any object with the ``CONFIGURATION_FIELDS``) and what it measured."""
        return cls(**{field: getattr(configuration, field) for field in CONFIGURATION_FIELDS}, **measurements)

    _canonical_accelerator = pydantic.field_validator("accelerator", mode="before")(canonical_accelerator)

    @pydantic.model_validator(mode="after")
    def _nodes_within_workers(self) -> Observation:
        if self.nodes is not None and self.nodes > self.workers:
            raise ValueError(f"nodes ({self.nodes}) cannot exceed workers ({self.workers})")
        return self


CSV_COLUMNS: tuple[str, ...] = tuple(Observation.model_fields)
REQUIRED_COLUMNS: frozenset[str] = frozenset(
    name for name, field in Observation.model_fields.items() if field.is_required()
)
MEASURES: tuple[str, ...] = ("execution_seconds", "startup_seconds")
"""What a run measured; the other fields (but its workload and source) are its configuration."""


def measured_accelerators(observations: Iterable[Observation]) -> tuple[str, ...]:
    """The accelerators runs were measured on, the most measured first (ties by name)."""
    counts = collections.Counter(o.accelerator for o in observations if o.accelerator)
    return tuple(sorted(counts, key=lambda accelerator: (-counts[accelerator], accelerator)))


def runs_on(observations: Iterable[Observation], accelerator: str | None) -> list[Observation]:
    """The runs a job on ``accelerator`` is predicted from: its own, and those that name none (they belong to all)."""
    return [o for o in observations if o.accelerator in (accelerator, None)]


class AcceleratorChoice(pydantic.BaseModel):
    """Whose runs predict a job: its accelerator's where the profile measured it, else the most measured one's."""

    model_config = pydantic.ConfigDict(frozen=True)

    job: str | None  # the job's accelerator; None: it does not say
    used: str | None  # the accelerator of the runs used; None: the profile's runs name none (they fit any)
    measured: tuple[str, ...] = ()  # the profile's accelerators, the most measured first

    @property
    def assumed(self) -> str | None:
        """The accelerator the job is predicted on in place of its own (unknown or unmeasured); None when none is."""
        return self.used if self.used is not None and self.used != self.job else None

    def warning(self, profile: str) -> str | None:
        """Why the prediction may be far off: its runs were measured on another accelerator (None: they were not)."""
        if self.assumed is None:
            return None
        measured = ", ".join(self.measured)
        if self.job is None:
            return (
                f"the RayJob does not say which accelerator its workers run on: predicted from profile {profile}'s "
                f"runs on {self.assumed} (measured on {measured}); set {contract.ACCELERATOR} or a nodeSelector "
                "on nvidia.com/gpu.product"
            )
        return (
            f"profile {profile} has no runs on {self.job} (measured on {measured}): predicted from its runs on "
            f"{self.assumed}, which may be far off"
        )


def choose_accelerator(measured: Sequence[str], job: str | None) -> AcceleratorChoice:
    """The runs for a job on ``job`` among a profile's ``measured`` accelerators (``measured_accelerators``)."""
    used = None if not measured else job if job in measured else measured[0]
    return AcceleratorChoice(job=job, used=used, measured=tuple(measured))


@dataclasses.dataclass(frozen=True)
class RowProblem:
    """Why one CSV row was rejected, located precisely enough to fix it."""

    file: str
    line: int
    column: str | None
    reason: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}"
        return f"{where}: column {self.column!r}: {self.reason}" if self.column else f"{where}: {self.reason}"


def read_observations(
    path: str | pathlib.Path, *, skip_bad_rows: bool = False
) -> tuple[list[Observation], list[RowProblem]]:
    """Parse a CSV of observations.

    A bad header always raises. Bad rows raise too unless ``skip_bad_rows``,
    in which case they are returned as problems for the caller to report —
    never dropped silently.
    """
    path = pathlib.Path(path)
    name = str(path)
    with path.open(newline="", encoding="utf-8") as stream:
        reader = csv.reader(stream)
        header = next(reader, None)
        while header and header[0].startswith("#"):
            header = next(reader, None)
        if header is None:
            empty = RowProblem(name, reader.line_num or 1, None, "the file is empty; expected a header row")
            raise ObservationsError([empty])
        header = [h.strip() for h in header]
        _check_header(name, reader.line_num, header)
        observations: list[Observation] = []
        problems: list[RowProblem] = []
        for cells in reader:
            line = reader.line_num
            if not any(c.strip() for c in cells):
                continue
            if len(cells) != len(header):
                problems.append(RowProblem(name, line, None, f"expected {len(header)} cells, found {len(cells)}"))
                continue
            raw = {column: (cell.strip() or None) for column, cell in zip(header, cells, strict=True)}
            try:
                observations.append(Observation.model_validate(raw))
            except pydantic.ValidationError as exc:
                problems.extend(_row_problems(name, line, exc))
    if problems and not skip_bad_rows:
        raise ObservationsError(problems)
    return observations, problems


def _check_header(name: str, line: int, header: list[str]) -> None:
    problems = [RowProblem(name, line, column, "unknown column") for column in header if column not in CSV_COLUMNS]
    problems += [
        RowProblem(name, line, column, "required column is missing")
        for column in sorted(REQUIRED_COLUMNS - set(header))
    ]
    duplicated = {column for column in header if header.count(column) > 1}
    problems += [RowProblem(name, line, column, "column appears twice") for column in sorted(duplicated)]
    if problems:
        raise ObservationsError(problems)


def _row_problems(name: str, line: int, exc: pydantic.ValidationError) -> list[RowProblem]:
    problems = []
    for error in exc.errors(include_url=False):
        column = str(error["loc"][0]) if error["loc"] else None
        problems.append(RowProblem(name, line, column, error["msg"]))
    return problems


def write_observations(
    path: str | pathlib.Path, observations: Iterable[Observation], comments: Sequence[str] = ()
) -> None:
    """Write observations with the full header; unknown values as empty cells."""
    with pathlib.Path(path).open("w", newline="", encoding="utf-8") as stream:
        stream.writelines(f"# {line}\n" for line in comments)
        writer = csv.writer(stream)
        writer.writerow(CSV_COLUMNS)
        writer.writerows(_row(o) for o in observations)


def append_observation(path: str | pathlib.Path, observation: Observation, comments: Sequence[str] = ()) -> None:
    """Add one run to a CSV (created with ``comments`` and the header if absent), flushed to disk.

    Sweeps call this after every run, so an interrupted sweep loses nothing it finished. A file with an older
    header (fewer columns) is rewritten with the full one first, its comments and runs kept: a row appended under
    another header would shift its cells.
    """
    path = pathlib.Path(path)
    if not path.exists() or path.stat().st_size == 0:
        write_observations(path, [observation], comments)
        return
    kept_comments, header = _heading(path)
    if header != list(CSV_COLUMNS):
        rewritten = path.with_name(path.name + ".rewrite")
        write_observations(rewritten, [*read_observations(path)[0], observation], kept_comments)
        os.replace(rewritten, path)
        return
    with path.open("a", newline="", encoding="utf-8") as stream:
        csv.writer(stream).writerow(_row(observation))
        stream.flush()
        os.fsync(stream.fileno())


def _heading(path: pathlib.Path) -> tuple[list[str], list[str]]:
    """A CSV's comment lines (without their ``#``) and its header's columns."""
    comments: list[str] = []
    with path.open(newline="", encoding="utf-8") as stream:
        for line in stream:
            if not line.startswith("#"):
                return comments, [cell.strip() for cell in next(csv.reader([line]), [])]
            comments.append(line[1:].strip())
    return comments, []


def _row(observation: Observation) -> list[str]:
    values = observation.model_dump()
    return ["" if values[c] is None else _cell(values[c]) for c in CSV_COLUMNS]


def _cell(value: object) -> str:
    """Shortest faithful text: integers without a trailing ``.0``."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
