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
    """Posts AdmissionReviews to the running webhook (``path``: which of its webhooks) and applies what it answers."""

    def __init__(self, port: int, ca: str, path: str = "/advise") -> None:
        super().__init__(f"https://127.0.0.1:{port}{path}", ca)
        self.port, self.ca = port, ca

    def at(self, path: str) -> Webhook:
        """The same server's webhook at ``path`` (``/guard``: the held annotation's)."""
        return Webhook(self.port, self.ca, path)

    @staticmethod
    def envelope(
        rayjob: dict[str, Any],
        operation: str = "CREATE",
        dry_run: bool = False,
        old: dict[str, Any] | None = None,
        username: str = "alice",
    ) -> dict[str, Any]:
        """The AdmissionReview the API server sends for ``operation`` on ``rayjob`` by ``username`` (UPDATE: from
        ``old``, by default itself)."""
        new, old = {"DELETE": (None, rayjob), "UPDATE": (rayjob, old or rayjob)}.get(operation, (rayjob, None))
        request = {
            "uid": str(uuid.uuid4()),
            "kind": {"group": "ray.io", "version": "v1", "kind": "RayJob"},
            "resource": {"group": "ray.io", "version": "v1", "resource": "rayjobs"},
            "name": rayjob["metadata"]["name"],
            "namespace": rayjob["metadata"].get("namespace", "default"),
            "operation": operation,
            "userInfo": {"username": username, "groups": ["system:authenticated"]},
            "object": new,
            "oldObject": old,
            "dryRun": dry_run,
        }
        return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}

    def review(
        self, rayjob: dict[str, Any], dry_run: bool = False, operation: str = "CREATE", **request: Any
    ) -> dict[str, Any]:
        """The webhook's AdmissionResponse to ``operation`` (default: the creation) of ``rayjob`` (``request``: as for
        ``envelope``)."""
        envelope = self.envelope(rayjob, operation, dry_run, **request)
        status, reason, body = self.post(json.dumps(envelope).encode())
        assert status == 200, (status, reason)
        response: dict[str, Any] = json.loads(body)["response"]
        assert response["uid"] == envelope["request"]["uid"]
        return response

    def admit(
        self, rayjob: dict[str, Any], dry_run: bool = False, operation: str = "CREATE", **request: Any
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """(the RayJob as it would be stored, the response); asserts it is allowed and valid."""
        response = self.review(rayjob, dry_run, operation, **request)
        assert response["allowed"] is True, response
        patched = copy.deepcopy(rayjob)
        if "patch" in response:
            assert response["patchType"] == "JSONPatch"
            patched = jsonpatch.apply_patch(rayjob, json.loads(base64.b64decode(response["patch"])))
        assert_valid_rayjob(patched)
        return patched, response
