"""Release hygiene (docs/releasing.md): the licence, one version from the git tag in the package, both CLIs and the
chart, a changelog with an Unreleased section, the files a contributor and a security reporter look for."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from importlib.metadata import version

import pytest
import yaml
from packaging.version import Version

from rayjob_advisor import __version__
from rayjob_advisor.cli import kubectl_plugin, verbs
from rayjob_advisor_testkit.paths import CHART, REPO


def chart() -> dict:
    return yaml.safe_load((CHART / "Chart.yaml").read_text())


def test_the_licence_is_the_apache_license_the_metadata_names():
    text = (REPO / "LICENSE").read_text()
    assert text.strip().startswith("Apache License\n                           Version 2.0, January 2004")
    assert "END OF TERMS AND CONDITIONS" in text and len(text.splitlines()) > 200  # the full text
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["license"] == {"text": "Apache-2.0"} and chart()["annotations"]["artifacthub.io/license"] == (
        "Apache-2.0"
    )


@pytest.mark.parametrize(
    ("main", "prog"), [(verbs.main, "rayjob-advisor"), (kubectl_plugin.main, "kubectl rayjob-advisor")]
)
def test_both_command_lines_print_the_packages_version(capsys, main, prog):
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0 and capsys.readouterr().out == f"{prog} {__version__}\n"
    assert __version__ == version("rayjob-advisor") and Version(__version__)  # PEP 440, from the build


def test_the_chart_names_the_release_this_tree_becomes():
    """At tag vX.Y.Z the package is X.Y.Z and so are the chart and its appVersion (the image's default tag); after
    it, the package is a development version of a later release, which the chart must name already."""
    package, app = Version(__version__), Version(chart()["appVersion"])
    assert chart()["version"] == chart()["appVersion"]
    if package.is_devrelease or package.local:
        assert app >= Version(package.base_version), "after a release, name the next one in Chart.yaml"
    else:
        assert app == package, "tag a release only where Chart.yaml names it"


def git(repository, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(repository), "-c", "user.name=t", "-c", "user.email=t@t", *args], capture_output=True,
        check=True,
    )  # fmt: skip


def test_the_version_comes_from_the_git_tag(tmp_path):
    """What a build computes from this project's setuptools-scm settings, before the first tag, at one, after it."""
    shutil.copy(REPO / "pyproject.toml", tmp_path)
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-qm", "first")

    def computed() -> str:
        done = subprocess.run(
            [sys.executable, "-m", "setuptools_scm"], cwd=tmp_path, capture_output=True, text=True, check=True
        )
        return done.stdout.strip()

    assert computed().startswith("0.1.0.dev1+g")  # the development of 0.1.0
    git(tmp_path, "tag", "v0.1.0")
    assert computed() == "0.1.0"
    git(tmp_path, "commit", "-qm", "second", "--allow-empty")
    assert computed().startswith("0.1.1.dev1+g")


def test_the_changelog_opens_with_the_unreleased_changes():
    sections = [line for line in (REPO / "CHANGELOG.md").read_text().splitlines() if line.startswith("## ")]
    assert sections[0] == "## Unreleased"


def test_contributing_and_security_say_what_they_must():
    contributing = (REPO / "CONTRIBUTING.md").read_text()
    ci = (REPO / ".ci" / "run").read_text()
    assert "python3 -m venv .venv && .venv/bin/pip install -e '.[test]' -e ./testkit && hack/install-promtool" in ci
    for needed in (
        "python3 -m venv .venv && .venv/bin/pip install -e '.[test]' -e ./testkit && hack/install-promtool",
        ".ci/lint && .venv/bin/pytest",
        ".venv/bin/pytest tests/test_contract.py",
        "operator/rayjob_advisor/contract.py",
        "docs/architecture.md",
    ):
        assert needed in contributing, needed
    assert "private" in (REPO / "SECURITY.md").read_text().lower()
