"""The Helm chart rendered as ``helm install`` would render it (by helm-python-sdk, no helm binary), as objects."""

from __future__ import annotations

from typing import Any

import helm_python as helm
import yaml

from rayjob_advisor_testkit.paths import CHART


def render(values: dict[str, Any]) -> list[dict[str, Any]]:
    """The chart's objects with ``values``, installed as release ``advisor`` in namespace ``ops``."""
    helm.disable_logging()
    manifests = helm.Chart.load(str(CHART)).render(values, name="advisor", namespace="ops", is_install=True)
    return [
        document
        for path, text in sorted(manifests.items())
        if not path.endswith("NOTES.txt")
        for document in yaml.safe_load_all(text)
        if document
    ]


def by_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """The objects of one kind, in order."""
    return [o for o in objects if o["kind"] == kind]
