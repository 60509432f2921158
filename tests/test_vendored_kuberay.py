"""The vendored KubeRay files are KubeRay's, unmodified, with their provenance; hack/vendor-kuberay.py refreshes."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest

from rayjob_advisor_testkit.paths import KUBERAY, REPO

SCRIPT = REPO / "hack" / "vendor-kuberay.py"
ROW = re.compile(r"^\| (\S+) \| (\S+) \| ([0-9a-f]{40}) \|$", re.MULTILINE)


def blob_hash(data: bytes) -> str:
    done = subprocess.run(["git", "hash-object", "--stdin"], input=data, capture_output=True, check=True)
    return done.stdout.decode().strip()


def listed(folder) -> dict[str, str]:
    """SOURCE.md's table: each file here and its git blob hash."""
    return {here: blob for here, _, blob in ROW.findall((folder / "SOURCE.md").read_text())}


def test_every_vendored_file_is_listed_with_the_hash_of_kuberays_blob():
    files = {p.relative_to(KUBERAY).as_posix() for p in KUBERAY.rglob("*") if p.is_file()} - {"SOURCE.md"}
    hashes = listed(KUBERAY)
    assert set(hashes) == files and len([f for f in files if f.startswith("samples/")]) == 25
    for name, blob in hashes.items():
        assert blob_hash((KUBERAY / name).read_bytes()) == blob, f"{name} differs from KubeRay's: refresh it"
    notes = (KUBERAY / "SOURCE.md").read_text()
    assert "Apache License 2.0" in notes and "Version: `v1." in notes
    assert "Apache License" in (KUBERAY / "LICENSE").read_text()


def git(checkout, *args: str) -> None:
    subprocess.run(["git", "-C", str(checkout), *args], capture_output=True, check=True)


@pytest.fixture
def checkout(tmp_path):
    """A KubeRay-shaped git checkout: the two CRDs, a RayJob sample in a sub-folder, a RayCluster one, a LICENSE."""
    root = tmp_path / "kuberay"
    crds, samples = root / "ray-operator/config/crd/bases", root / "ray-operator/config/samples"
    (samples / "mnist").mkdir(parents=True)
    crds.mkdir(parents=True)
    for name in ("ray.io_rayjobs.yaml", "ray.io_rayclusters.yaml"):
        (crds / name).write_text(f"kind: CustomResourceDefinition\nmetadata: {{name: {name}}}\n")
    (samples / "mnist" / "ray-job.mnist.yaml").write_text("kind: ConfigMap\n---\nkind: RayJob\n")
    (samples / "ray-cluster.yaml").write_text("kind: RayCluster\n")
    (root / "LICENSE").write_text("Apache License\n")
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "kuberay")
    git(root, "tag", "v9.9.9")
    return root


def vendor(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60, check=False)


def test_the_refresh_copies_the_crds_the_rayjob_samples_and_the_licence_and_says_whence(checkout, tmp_path):
    into = tmp_path / "vendored"
    (into / "samples").mkdir(parents=True)
    (into / "samples" / "gone.yaml").write_text("kind: RayJob\n")  # a sample KubeRay no longer has
    done = vendor(str(checkout), "--into", str(into))
    assert done.returncode == 0, done.stderr
    files = {p.relative_to(into).as_posix() for p in into.rglob("*") if p.is_file()}
    assert files == {
        "crds/ray.io_rayjobs.yaml", "crds/ray.io_rayclusters.yaml", "samples/mnist/ray-job.mnist.yaml", "LICENSE",
        "SOURCE.md",
    }  # fmt: skip
    assert (into / "samples/mnist/ray-job.mnist.yaml").read_bytes() == (
        checkout / "ray-operator/config/samples/mnist/ray-job.mnist.yaml"
    ).read_bytes()
    assert listed(into) == {name: blob_hash((into / name).read_bytes()) for name in files - {"SOURCE.md"}}
    notes = (into / "SOURCE.md").read_text()
    assert "Version: `v9.9.9`\n- Commit: " in notes and re.search(r"Commit: [0-9a-f]{40} \(", notes)


def test_a_release_archive_needs_its_version_named(checkout, tmp_path):
    shutil.rmtree(checkout / ".git")
    done = vendor(str(checkout), "--into", str(tmp_path / "vendored"))
    assert done.returncode != 0 and done.stderr.strip().splitlines() == [
        f"vendor-kuberay: {checkout} is no git checkout: give --version (e.g. v1.7.0)"
    ]
    assert vendor(str(checkout), "--into", str(tmp_path / "vendored"), "--version", "v1.7.0").returncode == 0
    assert "Version: `v1.7.0`\n- Commit: none: a release archive" in (tmp_path / "vendored" / "SOURCE.md").read_text()
