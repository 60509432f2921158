"""Reading a RayJob manifest file as the API server would decode it: one line naming the fix for what it would not.

Annotation and label values must be strings. YAML 1.1 reads an unquoted
``off``/``on``/``yes``/``no`` as a boolean, ``2026-12-02T18:00:00Z`` as a
timestamp and ``16000`` as a number, which kubectl would reject: the error
shows the value quoted, as the user wrote it (the YAML node's own text).
"""

from __future__ import annotations

import contextlib
import json
import pathlib
import sys
from typing import Any

import yaml

from rayjob_advisor.errors import UsageError

_YAML_STRING = "tag:yaml.org,2002:str"
_YAML_TYPES = {"bool": "a boolean", "int": "an integer", "float": "a number", "timestamp": "a timestamp"}


def read_rayjob(path: pathlib.Path, kind: str = "RayJob") -> dict[str, Any]:
    """The one RayJob (or other ``kind``: a RayCluster) of a (possibly multi-document) manifest file (``-``: standard
    input), its metadata as the API server decodes it (``metadata`` a map, ``annotations`` and ``labels`` maps of
    strings)."""
    stdin = str(path) == "-"
    if stdin:
        path = pathlib.Path("<stdin>")  # how the messages below name it
    try:
        with contextlib.nullcontext(sys.stdin) if stdin else path.open(encoding="utf-8") as stream:
            nodes = list(yaml.compose_all(stream, Loader=yaml.SafeLoader))
        loader = yaml.SafeLoader("")
        documents = [(node, loader.construct_document(node)) for node in nodes]
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not a YAML manifest (not UTF-8 text)") from None
    except (OSError, yaml.YAMLError) as exc:
        raise UsageError(str(exc)) from None
    rayjobs = [(node, d) for node, d in documents if isinstance(d, dict) and d.get("kind") == kind]
    if len(rayjobs) != 1:
        raise UsageError(f"{path}: expected exactly one {kind} document, found {len(rayjobs)}")
    node, rayjob = rayjobs[0]
    metadata = _child(node, "metadata")
    if not isinstance(rayjob.get("metadata") or {}, dict):
        raise UsageError(f"{path}: the {kind}'s metadata is not a map")
    for field in ("annotations", "labels"):
        values = _child(metadata, field)
        if values is not None and values.tag != "tag:yaml.org,2002:null" and not isinstance(values, yaml.MappingNode):
            raise UsageError(f"{path}:{values.start_mark.line + 1}: metadata.{field} is not a map")
        for key, value in values.value if isinstance(values, yaml.MappingNode) else []:
            where = f"{path}:{key.start_mark.line + 1}: metadata.{field}"
            if key.tag != _YAML_STRING:
                raise UsageError(f"{where}: key {key.value}: {_not_a_string(key)}")
            if value.tag != _YAML_STRING:
                raise UsageError(f"{where}: {key.value}: {_not_a_string(value, key.value)}")
    return rayjob


def _child(node: yaml.Node | None, key: str) -> yaml.Node | None:
    """The value node of ``key`` in a YAML mapping node."""
    if isinstance(node, yaml.MappingNode):
        return next((v for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == key), None)
    return None


def _not_a_string(node: yaml.Node, key: str = "") -> str:
    """Why a YAML node is no string, and the fix (``key``: the annotation or label it is the value of)."""
    if not isinstance(node, yaml.ScalarNode):
        return f"a {'list' if isinstance(node, yaml.SequenceNode) else 'map'} where Kubernetes takes a string"
    if not node.value:
        return f'an empty value (null) where Kubernetes takes a string: write {key}: "" for an empty one'
    kind = _YAML_TYPES.get(node.tag.rsplit(":", 1)[-1], "no string")
    fix = f"{key}: {json.dumps(node.value)}" if key else json.dumps(node.value)
    return f"YAML reads {node.value} as {kind}, and Kubernetes takes strings only: quote it: {fix}"
