"""Runtime profiles: the observations of one workload class, and the model fitted on them."""

from __future__ import annotations

from collections.abc import Sequence

from rayjob_advisor.observations import Observation


class UnknownWorkload(LookupError):
    """No observations exist for the workload a RayJob names."""


def workloads(observations: Sequence[Observation]) -> list[str]:
    """The distinct named workloads, sorted."""
    return sorted({o.workload for o in observations if o.workload})


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
