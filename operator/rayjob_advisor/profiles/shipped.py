"""The profiles shipped in the package (``data/``: real runs, see its NOTICE), and choosing runs by workload."""

from __future__ import annotations

import pathlib
from collections.abc import Sequence

from rayjob_advisor.errors import UnknownWorkload
from rayjob_advisor.observations import Observation

SHIPPED_DATA = pathlib.Path(__file__).parent / "data"


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
