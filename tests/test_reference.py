"""The reference pages of the documentation site are generated from the code, and cover it."""

from __future__ import annotations

import re
import subprocess
import sys

from rayjob_advisor import contract, key_docs, reasons
from rayjob_advisor_testkit.paths import REPO

REFERENCE = REPO / "docs" / "reference"


def contract_keys() -> set[str]:
    """Every ``rayjob-advisor.io/...`` name contract.py defines (annotations, labels, the Kueue gate)."""
    return {
        value
        for value in vars(contract).values()
        if isinstance(value, str) and value.startswith(contract.PREFIX) and value != contract.PREFIX
    }


def test_the_committed_pages_are_a_fresh_generation():
    """Edit the code (or the description next to it), then run hack/gen-reference.py: never the pages."""
    done = subprocess.run(
        [sys.executable, REPO / "hack" / "gen-reference.py", "--check"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-4000:]


def test_every_key_of_the_contract_has_a_row_in_the_annotations_reference():
    page = (REFERENCE / "annotations.md").read_text()
    rows = set(re.findall(r"^\| `(rayjob-advisor\.io/[-a-z]+)` \|", page, flags=re.MULTILINE))
    assert len(contract_keys()) > 15  # the enumeration finds the contract's keys
    prefixed = {key for key in contract_keys() if key.endswith("-") and any(row.startswith(key) for row in rows)}
    missing = contract_keys() - rows - prefixed  # a key ending in "-" (hook-) is a prefix: its names have rows
    assert not missing, f"keys missing from key_docs.KEY_DOCS (docs/reference/annotations.md): {missing}"
    listed = [doc.key for docs in key_docs.KEY_DOCS.values() for doc in docs]
    assert len(listed) == len(set(listed)), "a key documented twice"


def test_every_event_reason_has_a_row_in_the_events_reference():
    defined = {
        value
        for name, value in vars(reasons).items()
        if name.isupper() and not name.startswith("_") and isinstance(value, str)
    }
    documented = [doc.reason for doc in reasons.REASON_DOCS]
    assert len(defined) > 15 and sorted(documented) == sorted(defined)
    page = (REFERENCE / "events.md").read_text()
    assert all(f"| `{reason}` |" in page for reason in defined)
