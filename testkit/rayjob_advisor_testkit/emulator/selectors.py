"""The objects a list or watch request selects: equality-based label selectors and metadata.name/namespace field
selectors, as the API server reads them; what the emulator does not support answers 400."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from rayjob_advisor_testkit.emulator.errors import ApiError

Selector = Callable[[dict[str, Any]], bool]


def query_selector(query: Mapping[str, str]) -> Selector:
    """The request's labelSelector and fieldSelector, both applied."""
    labels = _selector(query.get("labelSelector"), fields=False)
    fields = _selector(query.get("fieldSelector"), fields=True)
    return lambda obj: labels(obj) and fields(obj)


def _selector(text: str | None, fields: bool) -> Selector:
    """Equality-based label selectors and metadata.name/namespace field selectors; others answer 400."""
    if not text:
        return lambda obj: True
    if "(" in text:
        raise ApiError(400, f"set-based selectors are not supported by the emulator: {text!r}")
    checks = []
    for term in text.split(","):
        match = re.fullmatch(r"\s*(!?)([^!=\s]+)\s*(?:(==|=|!=)\s*(\S*))?\s*", term)
        if not match:
            raise ApiError(400, f"unable to parse requirement: {term!r}")
        negated, key, operator, wanted = match.groups()
        if fields and (negated or operator is None or key not in ("metadata.name", "metadata.namespace")):
            raise ApiError(400, f'field label not supported: "{key}"')
        checks.append((key, negated == "!", operator, wanted))

    def value(obj: dict[str, Any], key: str) -> str | None:
        meta = obj.get("metadata", {})
        found: str | None = meta.get(key.removeprefix("metadata.")) if fields else meta.get("labels", {}).get(key)
        return found

    def select(obj: dict[str, Any]) -> bool:
        for key, negated, operator, wanted in checks:
            found = value(obj, key)
            if operator is None and (found is None) != negated:
                return False
            if operator in ("=", "==") and found != wanted:
                return False
            if operator == "!=" and found == wanted:
                return False
        return True

    return select
