"""Where the repository and the shared data are: the kit is installed editable from a checkout, next to ../shared.

``../shared`` (or ``$RAYJOB_ADVISOR_SHARED``) holds what the tests, benchmarks and hack scripts read but the
repository does not ship: the KubeRay CRDs and samples every RayJob is validated against, and the measured
datasets (Pollux, Sia). Without it they stop with one line that says so (``require_shared``), not a traceback.
"""

from __future__ import annotations

import os
import pathlib

REPO = pathlib.Path(__file__).resolve().parents[2]
SHARED_VARIABLE = "RAYJOB_ADVISOR_SHARED"
SHARED = pathlib.Path(os.environ.get(SHARED_VARIABLE) or REPO.parent / "shared")
KUBERAY_CRDS = SHARED / "kuberay" / "crds"
SAMPLES = SHARED / "kuberay" / "samples"
POLLUX = SHARED / "datasets" / "pollux"
SIA = SHARED / "datasets" / "sia"
CRDS = REPO / "crds"
CHART = REPO / "charts" / "rayjob-advisor"

if not CRDS.is_dir():
    raise ImportError(f"the test kit reads the checkout it lives in, and {REPO} is none: pip install -e ./testkit")


class SharedDataMissing(SystemExit):
    """``../shared`` is not there: a SystemExit, so that a script stops with this one line and no traceback."""


def require_shared(*needed: pathlib.Path) -> None:
    """Stop with one line naming what is missing when ``needed`` (default: all of ``../shared`` we read) is."""
    missing = [path for path in needed or (KUBERAY_CRDS, SAMPLES, POLLUX) if not path.exists()]
    if missing:
        raise SharedDataMissing(
            f"rayjob-advisor: {missing[0]} is missing: the tests, benchmarks and hack scripts read ../shared "
            f"(KubeRay CRDs and samples, datasets; docs/development.md, 'The shared data') next to the checkout, "
            f"or where ${SHARED_VARIABLE} points"
        )
