"""Where the repository, the vendored KubeRay files and the optional datasets are (the kit reads its checkout).

KubeRay's CRDs, which every RayJob is validated against, and its sample RayJobs are vendored in
``testkit/kuberay`` (Apache-2.0; its SOURCE.md gives the version, ``hack/vendor-kuberay.py`` refreshes them):
a fresh clone tests itself. The raw measured datasets some benchmarks read (the Pollux step-time traces, the
Sia ones) are not in the repository: they are looked for under ``$RAYJOB_ADVISOR_SHARED/datasets`` only when
that variable names a folder (no folder beside the checkout is read unasked, so a checkout tests as a fresh clone
does), an optional extra source; a benchmark without its data stops with one line that says where the data comes
from (``require_data``).
"""

from __future__ import annotations

import os
import pathlib

REPO = pathlib.Path(__file__).resolve().parents[2]
KUBERAY = REPO / "testkit" / "kuberay"
KUBERAY_CRDS = KUBERAY / "crds"
SAMPLES = KUBERAY / "samples"
CRDS = REPO / "crds"
CHART = REPO / "charts" / "rayjob-advisor"
SHARED_VARIABLE = "RAYJOB_ADVISOR_SHARED"
SHARED = pathlib.Path(os.environ.get(SHARED_VARIABLE) or f"${SHARED_VARIABLE}")  # unset: a path that is not there
POLLUX = SHARED / "datasets" / "pollux"
SIA = SHARED / "datasets" / "sia"

if not CRDS.is_dir():
    raise ImportError(f"the test kit reads the checkout it lives in, and {REPO} is none: pip install -e ./testkit")


class DataMissing(SystemExit):
    """A dataset is not there: a SystemExit, so that a script stops with this one line and no traceback."""


def require_data(path: pathlib.Path, origin: str) -> None:
    """Stop with one line naming ``path`` and where its data comes from (``origin``) when it is missing."""
    if not path.exists():
        raise DataMissing(
            f"rayjob-advisor: {path} is missing: {origin}; set ${SHARED_VARIABLE} to a folder with it under "
            "datasets/, or give its folder"
        )
