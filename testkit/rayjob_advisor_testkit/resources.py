"""What the emulator serves for the advisor: RayJobs (real KubeRay CRD), RuntimeProfiles (our CRD), kopf's peerings,
core resources."""

from __future__ import annotations

import datetime
from typing import Any

from rayjob_advisor_testkit import emulator, schemas
from rayjob_advisor_testkit.paths import CRDS
from rayjob_advisor_testkit.rayjobs import RAYJOB_SCHEMA

RUNTIMEPROFILE_SCHEMA = schemas.crd_schema(CRDS / "rayjob-advisor.io_runtimeprofiles.yaml", "v1alpha1")


def advisor_resources() -> list[emulator.ResourceSpec]:
    """RayJobs and RuntimeProfiles, pruned, defaulted and validated by their CRD schemas, and the core resources."""
    return [
        emulator.ResourceSpec(
            "ray.io", "v1", "rayjobs", "RayJob", namespaced=True, status_subresource=True,
            categories=("all",), schema=RAYJOB_SCHEMA, validate=schemas.schema_validator(RAYJOB_SCHEMA),
        ),
        emulator.ResourceSpec(
            "rayjob-advisor.io", "v1alpha1", "runtimeprofiles", "RuntimeProfile", namespaced=True,
            status_subresource=True, short_names=("rtp",), schema=RUNTIMEPROFILE_SCHEMA,
            validate=schemas.schema_validator(RUNTIMEPROFILE_SCHEMA),
        ),
        *emulator.PEERING_RESOURCES,
        *emulator.KUBE_RESOURCES,
    ]  # fmt: skip


class AdvisorEmulator(emulator.Emulator):
    """The emulator serving ``advisor_resources()``, which can act as KubeRay on the RayJobs' status."""

    def __init__(self) -> None:
        super().__init__(advisor_resources())

    def set_rayjob_status(
        self,
        namespace: str,
        name: str,
        *,
        deployment_status: str,
        job_status: str | None = None,
        start_time: datetime.datetime | str | None = None,
        end_time: datetime.datetime | str | None = None,
    ) -> dict[str, Any]:
        """Act as KubeRay: set jobDeploymentStatus/jobStatus and the Ray job's start/end (rayJobInfo and top-level)."""
        status: dict[str, Any] = {"jobDeploymentStatus": deployment_status}
        if job_status is not None:
            status["jobStatus"] = job_status
        for field, moment in (("startTime", start_time), ("endTime", end_time)):
            if moment is not None:
                stamp = moment if isinstance(moment, str) else emulator.rfc3339(moment)
                status[field] = stamp
                status.setdefault("rayJobInfo", {})[field] = stamp
        return self.patch_status("rayjobs", namespace, name, status)
