"""Refresh the KubeRay files the test kit vendors (testkit/kuberay/) from a KubeRay checkout or release.

    git clone --depth 1 --branch v1.7.0 https://github.com/ray-project/kuberay /tmp/kuberay
    .venv/bin/python hack/vendor-kuberay.py /tmp/kuberay

A git checkout names its own version (``git describe``, commit, date); an unpacked release archive has no
history: give ``--version`` (e.g. ``v1.7.0``). Copied byte for byte: the RayJob and RayCluster CRDs, every
sample manifest under ``ray-operator/config/samples/`` with a ``kind: RayJob`` document (sub-folders kept)
and KubeRay's LICENSE; ``SOURCE.md`` is rewritten with the version and each file's git blob hash, which
``tests/test_vendored_kuberay.py`` checks the files against. KubeRay is Apache-2.0.
"""

from __future__ import annotations

import argparse
import hashlib
import pathlib
import shutil
import subprocess
import sys

import yaml

INTO = pathlib.Path(__file__).resolve().parents[1] / "testkit" / "kuberay"
CRDS = ("ray.io_rayjobs.yaml", "ray.io_rayclusters.yaml")
CRD_DIR = pathlib.PurePosixPath("ray-operator/config/crd/bases")
SAMPLE_DIR = pathlib.PurePosixPath("ray-operator/config/samples")
REPOSITORY = "https://github.com/ray-project/kuberay"


def blob_hash(data: bytes) -> str:
    """git's object id of a file's bytes (``git hash-object``): what SOURCE.md records for each file."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def is_rayjob_sample(path: pathlib.Path) -> bool:
    """Whether a manifest holds a top-level ``kind: RayJob`` document (one that does not parse holds none)."""
    try:
        documents = list(yaml.safe_load_all(path.read_text(encoding="utf-8")))
    except (yaml.YAMLError, UnicodeDecodeError):
        return False
    return any(isinstance(d, dict) and d.get("kind") == "RayJob" for d in documents)


def git(checkout: pathlib.Path, *args: str) -> str | None:
    """A git command's output in ``checkout``; None when it is no git checkout (a release archive)."""
    done = subprocess.run(["git", "-C", str(checkout), *args], capture_output=True, text=True, check=False)
    return done.stdout.strip() if done.returncode == 0 else None


def selected(checkout: pathlib.Path) -> dict[pathlib.PurePosixPath, pathlib.PurePosixPath]:
    """What is vendored: its path here (under ``INTO``) for each path in KubeRay."""
    crds = {pathlib.PurePosixPath("crds", name): CRD_DIR / name for name in CRDS}
    samples_root = checkout / SAMPLE_DIR
    samples = {
        pathlib.PurePosixPath("samples", path.relative_to(samples_root).as_posix()): SAMPLE_DIR
        / path.relative_to(samples_root).as_posix()
        for path in sorted(samples_root.rglob("*.yaml"))
        if is_rayjob_sample(path)
    }
    return {**crds, **samples, pathlib.PurePosixPath("LICENSE"): pathlib.PurePosixPath("LICENSE")}


def source_notes(version: str, commit: str | None, date: str | None, hashes: dict[str, tuple[str, str]]) -> str:
    """SOURCE.md: where the files come from, under which licence, and each one's git blob hash."""
    rows = "\n".join(f"| {here} | {there} | {blob} |" for here, (there, blob) in sorted(hashes.items()))
    origin = f"{commit} ({date})" if commit else "none: a release archive, without git history"
    return f"""# KubeRay files vendored by the test kit

Every RayJob a test builds, and every patch the advisor writes, is validated against KubeRay's own CRDs;
the feature and robustness tests read KubeRay's sample RayJobs. They are copied unmodified from KubeRay.

- Repository: {REPOSITORY}
- Version: `{version}`
- Commit: {origin}
- Licence: Apache License 2.0 (`LICENSE` here is KubeRay's); Copyright the KubeRay authors.
- Selection: the RayJob and RayCluster CRDs of `{CRD_DIR}/`, and every `*.yaml` under `{SAMPLE_DIR}/`
  (sub-folders kept) with a top-level `kind: RayJob` document, multi-document files whole.
- Refresh: `.venv/bin/python hack/vendor-kuberay.py KUBERAY_CHECKOUT` (rewrites this file);
  `tests/test_vendored_kuberay.py` checks each file against the git blob hash below.

| file here | path in KubeRay | git blob |
|---|---|---|
{rows}
"""


def vendor(checkout: pathlib.Path, into: pathlib.Path, version: str | None) -> list[pathlib.PurePosixPath]:
    """Replace ``into``'s CRDs, samples, LICENSE and SOURCE.md with those of ``checkout``; the files written."""
    version = version or git(checkout, "describe", "--tags", "--always")
    if not version:
        raise SystemExit(f"vendor-kuberay: {checkout} is no git checkout: give --version (e.g. v1.7.0)")
    missing = [str(CRD_DIR / name) for name in CRDS if not (checkout / CRD_DIR / name).is_file()]
    if missing:
        raise SystemExit(f"vendor-kuberay: {checkout} is no KubeRay checkout: {missing[0]} is missing")
    files = selected(checkout)
    for stale in ("crds", "samples"):
        shutil.rmtree(into / stale, ignore_errors=True)
    hashes = {}
    for here, there in files.items():
        data = (checkout / there).read_bytes()
        (into / here).parent.mkdir(parents=True, exist_ok=True)
        (into / here).write_bytes(data)
        hashes[here.as_posix()] = (there.as_posix(), blob_hash(data))
    commit, date = git(checkout, "rev-parse", "HEAD"), git(checkout, "log", "-1", "--format=%cI")
    (into / "SOURCE.md").write_text(source_notes(version, commit, date, hashes), encoding="utf-8")
    return [*files, pathlib.PurePosixPath("SOURCE.md")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkout", type=pathlib.Path, help="a KubeRay git checkout, or an unpacked release archive")
    parser.add_argument("--version", help="the KubeRay version (default: git describe of the checkout)")
    parser.add_argument("--into", type=pathlib.Path, default=INTO, help=argparse.SUPPRESS)
    args = parser.parse_args()
    written = vendor(args.checkout, args.into, args.version)
    print(f"{len(written)} files in {args.into}", file=sys.stderr)


if __name__ == "__main__":
    main()
