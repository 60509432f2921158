"""An HTTPS AdmissionReview client, as the API server calls a mutating webhook."""

from __future__ import annotations

import base64
import copy
import json
import uuid
from typing import Any

import jsonpatch

from rayjob_advisor_testkit.https import Endpoint
from rayjob_advisor_testkit.rayjobs import assert_valid_rayjob


class Webhook(Endpoint):
    """Posts AdmissionReviews to the running webhook and applies what it answers."""

    def __init__(self, port: int, ca: str) -> None:
        super().__init__(f"https://127.0.0.1:{port}/advise", ca)

    @staticmethod
    def envelope(rayjob: dict[str, Any], operation: str = "CREATE", dry_run: bool = False) -> dict[str, Any]:
        """The AdmissionReview the API server sends for ``operation`` on ``rayjob`` (UPDATE: from itself)."""
        new, old = {"DELETE": (None, rayjob), "UPDATE": (rayjob, rayjob)}.get(operation, (rayjob, None))
        request = {
            "uid": str(uuid.uuid4()),
            "kind": {"group": "ray.io", "version": "v1", "kind": "RayJob"},
            "resource": {"group": "ray.io", "version": "v1", "resource": "rayjobs"},
            "name": rayjob["metadata"]["name"],
            "namespace": rayjob["metadata"].get("namespace", "default"),
            "operation": operation,
            "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
            "object": new,
            "oldObject": old,
            "dryRun": dry_run,
        }
        return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}

    def review(self, rayjob: dict[str, Any], dry_run: bool = False, operation: str = "CREATE") -> dict[str, Any]:
        """The webhook's AdmissionResponse to ``operation`` (default: the creation) of ``rayjob``."""
        envelope = self.envelope(rayjob, operation, dry_run)
        status, reason, body = self.post(json.dumps(envelope).encode())
        assert status == 200, (status, reason)
        response: dict[str, Any] = json.loads(body)["response"]
        assert response["uid"] == envelope["request"]["uid"]
        return response

    def admit(
        self, rayjob: dict[str, Any], dry_run: bool = False, operation: str = "CREATE"
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """(the RayJob as it would be stored, the response); asserts it is allowed and valid."""
        response = self.review(rayjob, dry_run, operation)
        assert response["allowed"] is True, response
        patched = copy.deepcopy(rayjob)
        if "patch" in response:
            assert response["patchType"] == "JSONPatch"
            patched = jsonpatch.apply_patch(rayjob, json.loads(base64.b64decode(response["patch"])))
        assert_valid_rayjob(patched)
        return patched, response
