"""An HTTPS AdmissionReview client, as the API server calls a mutating webhook."""

from __future__ import annotations

import base64
import copy
import json
import ssl
import urllib.request
import uuid
from typing import Any

import jsonpatch

from rayjob_advisor_testkit.rayjobs import assert_valid_rayjob


class Webhook:
    """Posts AdmissionReviews to the running webhook and applies what it answers."""

    def __init__(self, port: int, ca: str) -> None:
        self.url = f"https://127.0.0.1:{port}/advise"
        self.context = ssl.create_default_context(cafile=ca)

    def review(self, rayjob: dict[str, Any], dry_run: bool = False) -> dict[str, Any]:
        """The webhook's AdmissionResponse to the creation of ``rayjob``."""
        request = {
            "uid": str(uuid.uuid4()),
            "kind": {"group": "ray.io", "version": "v1", "kind": "RayJob"},
            "resource": {"group": "ray.io", "version": "v1", "resource": "rayjobs"},
            "name": rayjob["metadata"]["name"],
            "namespace": rayjob["metadata"].get("namespace", "default"),
            "operation": "CREATE",
            "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
            "object": rayjob,
            "oldObject": None,
            "dryRun": dry_run,
        }
        body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})
        http = urllib.request.Request(self.url, body.encode(), {"Content-Type": "application/json"})
        with urllib.request.urlopen(http, context=self.context, timeout=10) as answer:
            response: dict[str, Any] = json.load(answer)["response"]
        assert response["uid"] == request["uid"]
        return response

    def admit(self, rayjob: dict[str, Any], dry_run: bool = False) -> tuple[dict[str, Any], dict[str, Any]]:
        """(the RayJob as it would be stored, the response); asserts it is allowed and valid."""
        response = self.review(rayjob, dry_run)
        assert response["allowed"] is True, response
        patched = copy.deepcopy(rayjob)
        if "patch" in response:
            assert response["patchType"] == "JSONPatch"
            patched = jsonpatch.apply_patch(rayjob, json.loads(base64.b64decode(response["patch"])))
        assert_valid_rayjob(patched)
        return patched, response
