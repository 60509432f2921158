"""A strict Kubernetes API emulator on kmock, and a runner for a real kopf operator against it.

The generic core: it serves whatever ``ResourceSpec``s it is given (by default the core resources
every kopf operator needs); ``rayjob_advisor_testkit.resources`` declares the advisor's.

No kube-apiserver can run on these machines (DESIGN §9), so integration tests run the real
kopf operator against this emulator. kmock (0.8) serves discovery, renders responses and
streams, and listens on a local port; the object store is ours because kmock's
``KubernetesEmulator`` is lax exactly where operators break in production: it keeps no
resourceVersion, answers 200 to creations, replays every object on every watch, has no
status subresource, no optimistic concurrency, no schema, and crashes on ``/api/v1/namespaces``.

Semantics follow the kube-apiserver for custom resources: one global resourceVersion counter,
uid/creationTimestamp/generation, 201/409/404/422 with ``Status`` bodies, merge and JSON patches,
the status subresource, no-op writes that change nothing, finalizers, pruning of fields unknown
to the CRD schema (recorded as violations too), CRD defaulting and validation, and watches that
resume after a resourceVersion. Unsupported features (strategic merge, server-side apply,
dry-run, set-based label selectors, ...) are refused with 4xx instead of being ignored.

The emulator runs in its own thread and event loop, so tests are plain synchronous pytest tests,
and ``run_operator`` runs kopf in another thread with its own loop.

Its modules, one concern each, in the order a request meets them:

- ``server``: the ``Emulator`` tests hold: its thread and loop, synchronous accessors, ``wait_until``;
- ``routing``: URLs to targets and verbs, the query checked, kmock's handler;
- ``faults``: recorded requests, injected errors and delays;
- ``store``: objects, the global resourceVersion, creates, patches, updates, deletes, the history of writes;
- ``admission``: ObjectMeta's rules, pruning, CRD defaulting and validation, violations;
- ``selectors``: label and field selectors;
- ``watches``: watch streams from a resourceVersion on;
- ``specs`` and ``errors``: the served resources, the ``Status`` answers;
- ``kopf_operator``: a real kopf operator against it.
"""

from rayjob_advisor_testkit.emulator.admission import LABEL_VALUE, Violation
from rayjob_advisor_testkit.emulator.errors import ApiError
from rayjob_advisor_testkit.emulator.faults import Fault, RecordedRequest
from rayjob_advisor_testkit.emulator.kopf_operator import operator_settings, run_operator
from rayjob_advisor_testkit.emulator.server import Emulator
from rayjob_advisor_testkit.emulator.specs import KUBE_RESOURCES, PEERING_RESOURCES, ResourceSpec, Validator
from rayjob_advisor_testkit.emulator.store import merge_patch, rfc3339

__all__ = [
    "KUBE_RESOURCES",
    "LABEL_VALUE",
    "PEERING_RESOURCES",
    "ApiError",
    "Emulator",
    "Fault",
    "RecordedRequest",
    "ResourceSpec",
    "Validator",
    "Violation",
    "merge_patch",
    "operator_settings",
    "rfc3339",
    "run_operator",
]
