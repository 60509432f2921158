"""Where the repository and the shared data are: the kit is installed editable from a checkout, next to ../shared."""

from __future__ import annotations

import pathlib

REPO = pathlib.Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"
KUBERAY_CRDS = SHARED / "kuberay" / "crds"
SAMPLES = SHARED / "kuberay" / "samples"
POLLUX = SHARED / "datasets" / "pollux"
SIA = SHARED / "datasets" / "sia"
CRDS = REPO / "crds"

if not CRDS.is_dir():
    raise ImportError(f"the test kit reads the checkout it lives in, and {REPO} is none: pip install -e ./testkit")
