"""Reading a manifest that may be malformed, and the JSON merge patches every write of ours is.

Both kopf's controller patches and its admission patches (turned into
JSONPatch) apply merge patches. A merge patch replaces lists whole, so a
patch that changes one list item carries the whole list.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from rayjob_advisor import contract

MergePatch = dict[str, Any]


def nested(value: Any, *keys: str) -> Any:
    """The value at ``keys`` in nested mappings; None where one is missing or not a mapping (user YAML, or a
    manifest at admission, before the schema has checked it)."""
    for key in keys:
        value = value.get(key) if isinstance(value, Mapping) else None
    return value


def merge(target: MergePatch, patch: Mapping[str, Any]) -> MergePatch:
    """Merge-patch ``patch`` into ``target`` in place (nested mappings merge; other values replace)."""
    for key, value in patch.items():
        if isinstance(value, Mapping) and isinstance(target.get(key), Mapping):
            merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value) if isinstance(value, Mapping) else value
    return target


def metadata_patch(notes: Mapping[str, str | None]) -> MergePatch:
    """The metadata patch of ``notes`` (None removes a key): the label mirror's keys (``contract.LABEL_KEYS``) as
    labels, the rest as annotations."""
    labels = {key: value for key, value in notes.items() if key in contract.LABEL_KEYS}
    metadata = {"annotations": {key: value for key, value in notes.items() if key not in labels}}
    return {"metadata": {**metadata, "labels": labels} if labels else metadata}
