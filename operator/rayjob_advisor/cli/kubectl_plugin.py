"""``kubectl rayjob-advisor``: what the advisor says about live RayJobs, as a kubectl plugin.

kubectl runs any executable named ``kubectl-NAME`` on the PATH for ``kubectl NAME`` (``_`` in the file
name stands for ``-``): this package's console script ``kubectl-rayjob_advisor``. It reads RayJobs (and,
for ``what-if``, the workload's RuntimeProfile) with the user's kubeconfig and predicts locally, with the
code ``rayjob-advisor predict`` uses. Flags and messages follow kubectl's: ``-n``, ``-A``, ``--context``,
``--kubeconfig`` before or after the verb; a failure is one ``error: ...`` line (or the API server's
``Error from server (Reason): ...``) on stderr and exit status 1.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as dt
import functools
import json
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn, cast

import kubernetes
import pydantic
import urllib3

from rayjob_advisor import __version__, application, contract
from rayjob_advisor.advice import planner, prediction
from rayjob_advisor.cli.tables import assumptions_summary, model_summary, runtime_summary, what_if_table
from rayjob_advisor.cli.verbs import closed_pipe, integers, settings
from rayjob_advisor.errors import ApiUnavailable, UsageError, UserError, hide_library_warnings
from rayjob_advisor.kube import kubeapi
from rayjob_advisor.kube.config import advice_config
from rayjob_advisor.kuberay.rayjob import RayJob
from rayjob_advisor.profiles.codec import runs_from_k8s
from rayjob_advisor.profiles.store import ProfileStore

RAYJOBS = ("ray.io", "v1", "rayjobs")
PROG = "kubectl rayjob-advisor"
EXAMPLES = """examples:
  # The advisor's prediction, recommendation, ETA and errors of a RayJob, in words
  kubectl rayjob-advisor describe train -n team-a

  # Predicted runtimes and costs of the live job at other sizes, from its workload's RuntimeProfile
  kubectl rayjob-advisor what-if train --replicas 1,2,4,8

  # Every RayJob the advisor predicted, in all namespaces
  kubectl rayjob-advisor list -A
"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        """kubectl's usage errors: one line, a pointer to the help, exit status 1."""
        self.exit(1, f"error: {message}\nSee '{self.prog} --help' for usage.\n")


def _connection_flags(parser: argparse.ArgumentParser, defaults: bool) -> None:
    """kubectl's flags; on the verbs too (without defaults), so they may follow it as in kubectl."""

    def default(value: Any) -> Any:
        return value if defaults else argparse.SUPPRESS

    parser.add_argument("-n", "--namespace", default=default(None), help="the namespace (default: the context's)")
    parser.add_argument(
        "-A", "--all-namespaces", action="store_true", default=default(False), help="RayJobs of every namespace"
    )
    parser.add_argument("--context", default=default(None), help="the kubeconfig context to use")
    parser.add_argument("--kubeconfig", default=default(None), help="the kubeconfig file (default: $KUBECONFIG)")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description="What rayjob-advisor predicts and recommends for RayJobs in the cluster.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    _connection_flags(parser, defaults=True)
    verbs = parser.add_subparsers(required=True, metavar="COMMAND", parser_class=_Parser)
    describe = verbs.add_parser("describe", help="the advisor's view of a RayJob (all of them without NAME), in words")
    describe.add_argument("name", nargs="?", metavar="NAME")
    describe.set_defaults(handler=describe_rayjobs)
    what_if = verbs.add_parser("what-if", help="the live RayJob's predicted runtime and cost at other sizes")
    what_if.add_argument("name", metavar="NAME")
    what_if.add_argument("--replicas", type=integers, default=(), help="replica counts, e.g. 1,2,4")
    what_if.add_argument("--gpus", type=integers, default=(), help="GPUs per worker, e.g. 1,2")
    what_if.set_defaults(handler=what_if_rayjob)
    listing = verbs.add_parser("list", help="a line per RayJob: predicted runtime, deadline status, ETA, actual")
    listing.set_defaults(handler=list_rayjobs)
    for verb in (describe, what_if, listing):
        _connection_flags(verb, defaults=False)
    return parser


@dataclasses.dataclass(frozen=True)
class Cluster:
    """The API the kubeconfig context leads to, and the namespace to look in (None: every namespace)."""

    api: kubernetes.client.CustomObjectsApi
    namespace: str | None

    @property
    def where(self) -> str:
        return f"in {self.namespace} namespace" if self.namespace else "in any namespace"


def connect(args: argparse.Namespace) -> Cluster:
    """The kubeconfig's context (``--context``, else its current one) and namespace, as kubectl picks them."""
    try:
        contexts, current = kubernetes.config.list_kube_config_contexts(config_file=args.kubeconfig)
        chosen = current if args.context is None else next((c for c in contexts if c["name"] == args.context), None)
        if chosen is None:
            raise UsageError(f'context "{args.context}" does not exist')
        configuration = kubernetes.client.Configuration()
        kubernetes.config.load_kube_config(
            config_file=args.kubeconfig, context=chosen["name"], client_configuration=configuration
        )
    except (kubernetes.config.ConfigException, OSError) as exc:
        raise UsageError(f"no usable kubeconfig: {exc}") from None
    namespace = None if args.all_namespaces else args.namespace or chosen["context"].get("namespace") or "default"
    return Cluster(kubernetes.client.CustomObjectsApi(kubernetes.client.ApiClient(configuration)), namespace)


def _rayjobs(cluster: Cluster, name: str | None) -> list[dict[str, Any]]:
    """The named RayJob, else every RayJob where ``cluster`` looks (kubectl's NotFound when there is none)."""
    group, version, plural = RAYJOBS
    api, namespace = cluster.api, cluster.namespace
    if name is not None:
        if namespace is None:
            raise UsageError("a resource cannot be retrieved by name across all namespaces")
        return [_object(kubeapi.retried(api.get_namespaced_custom_object, group, version, namespace, plural, name))]
    if namespace is None:
        listing = kubeapi.retried(api.list_cluster_custom_object, group, version, plural)
    else:
        listing = kubeapi.retried(api.list_namespaced_custom_object, group, version, namespace, plural)
    found: list[dict[str, Any]] = _object(listing)["items"]
    if not found:
        raise _NoResources(f"No resources found {cluster.where}.")
    return sorted(found, key=lambda item: (item["metadata"].get("namespace", ""), item["metadata"]["name"]))


def _object(answer: object) -> dict[str, Any]:
    """The JSON object the custom-objects API answers (typed ``object`` by the client)."""
    return cast(dict[str, Any], answer)


class _NoResources(Exception):
    """kubectl's answer to an empty listing: a note on stderr, exit status 0."""


def _when(moment: dt.datetime, now: dt.datetime) -> str:
    """``2026-12-02T18:00:00Z (in 1h2m)`` or ``(3m ago)``."""
    delta = (moment - now).total_seconds()
    relative = f"in {contract.format_duration(delta)}" if delta >= 0 else f"{contract.format_duration(-delta)} ago"
    return f"{contract.format_timestamp(moment)} ({relative})"


def _read_json(raw: str | None) -> dict[str, Any] | None:
    """One of our JSON annotations; None when absent or not an object (edited by hand)."""
    try:
        value = json.loads(raw) if raw else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _number(value: object) -> float | None:
    """A finite number, from an annotation's text or a JSON value; None for anything else (edited by hand)."""
    try:
        number = float(str(value))
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _duration(value: object) -> str | None:
    """Seconds (``_number``'s input) as a Go duration."""
    seconds = _number(value)
    return None if seconds is None else contract.format_duration(seconds)


def _size(values: Mapping[str, Any]) -> str:
    """The size a ``recommendation`` or ``original-replicas`` annotation names: ``3 replicas x 2 GPUs``."""
    replicas = _number(values.get("replicas"))
    if replicas is None:
        return f"an unreadable size ({values.get('replicas')!r} replicas)"
    return planner.describe_size(int(replicas), _number(values.get("gpusPerWorker")) or 0.0)


def describe(body: Mapping[str, Any], now: dt.datetime) -> str:
    """What the advisor wrote on one RayJob, in words, as ``kubectl describe`` lays it out."""
    rayjob = RayJob(body)
    notes, labels = rayjob.annotations, rayjob.labels
    lines = [("Name", rayjob.metadata.get("name")), ("Namespace", rayjob.namespace)]
    workload = notes.get(contract.WORKLOAD) or labels.get(contract.WORKLOAD)
    lines.append(("Workload", workload or "<none> (the operator's default workload, if it has one)"))
    job_status = rayjob.deployment_status or "not started"
    lines.append(("Job status", f"{job_status} ({rayjob.job_status})" if rayjob.job_status else job_status))
    lines += _prediction_lines(notes.get(contract.PREDICTION))
    lines += _deadline_lines(rayjob, labels.get(contract.DEADLINE_STATUS), now)
    lines += _recommendation_lines(_read_json(notes.get(contract.RECOMMENDATION)), notes)
    if notes.get(contract.ETA):
        upper = f", at the latest {notes[contract.ETA_UPPER]} (upper bound)" if notes.get(contract.ETA_UPPER) else ""
        lines.append(("ETA", f"{notes[contract.ETA]} (median){upper}"))
    lines += _actual_lines(notes)
    lines.append(("Error", notes.get(contract.ERROR) or "<none>"))
    width = max(len(key) for key, _ in lines) + 2
    return "\n".join(f"{key + ':':<{width}}{value}" for key, value in lines)


def _prediction_lines(raw: str | None) -> list[tuple[str, str]]:
    if not raw:
        why = "see Error, or the advisor leaves the job alone: its mode is off, or it does not ask (docs/scope.md)"
        return [("Prediction", f"<none> (not predicted: {why})")]
    try:
        result = prediction.Prediction.model_validate_json(raw)
    except pydantic.ValidationError:
        return [("Prediction", f"unreadable {contract.PREDICTION} annotation: {raw}")]
    used = ", ".join(f"{key}={value}" for key, value in result.features.items() if value is not None)
    at = contract.format_timestamp(result.time)
    return [
        (
            "Prediction",
            f"runs {contract.format_duration(result.p50)} (median), at most {contract.format_duration(result.upper)}"
            f" at {result.confidence:.0%} confidence",
        ),
        ("  Model", f"{result.model}, fitted on RuntimeProfile {result.profile}; predicted at {at}"),
        ("  Features", used),
        ("  Assumptions", assumptions_summary(result) if result.assumed else "<none>"),
    ]


def _deadline_lines(rayjob: RayJob, status: str | None, now: dt.datetime) -> list[tuple[str, str]]:
    raw = rayjob.annotations.get(contract.DEADLINE)
    if not raw:
        return [("Deadline", "<none>")]
    try:
        deadline = contract.parse_deadline(raw).resolve(rayjob.created(now))
    except ValueError as exc:
        return [("Deadline", f"{raw}: {exc}")]
    return [("Deadline", f"{_when(deadline, now)}: {status or 'status not known yet'}")]


def _recommendation_lines(plan: dict[str, Any] | None, notes: Mapping[str, str]) -> list[tuple[str, str]]:
    if plan is None or "replicas" not in plan:  # no deadline: at most the kuberay hook's deadlines
        return []
    verdict = "meets the deadline" if plan.get("meetsDeadline") else "MISSES the deadline"
    lines = [("Recommendation", f"{_size(plan)} ({verdict}): {plan.get('reason', '')}")]
    original = _read_json(notes.get(contract.ORIGINAL_REPLICAS))
    if original is not None:
        lines.append(("  Resized", f"by the advisor, from {_size(original)}"))
    return lines


def _actual_lines(notes: Mapping[str, str]) -> list[tuple[str, str]]:
    actual = notes.get(contract.ACTUAL_RUNTIME_SECONDS)
    if not actual:
        return []
    text = _duration(actual) or f"unreadable ({actual!r} seconds)"
    off = _number(notes.get(contract.PREDICTION_ERROR))
    if off is not None:
        text += f" (the median prediction was {abs(off):.1%} {'over' if off >= 0 else 'under'} it)"
    return [("Actual runtime", text)]


def describe_rayjobs(cluster: Cluster, args: argparse.Namespace) -> str:
    now = contract.now()
    return "\n\n\n".join(describe(body, now) for body in _rayjobs(cluster, args.name))


def list_rayjobs(cluster: Cluster, args: argparse.Namespace) -> str:
    """kubectl's table: a RayJob a line, ``<none>`` where the advisor wrote nothing."""
    header = (["NAMESPACE"] if cluster.namespace is None else []) + [
        "NAME", "WORKLOAD", "PREDICTED", "UPPER", "DEADLINE-STATUS", "ETA", "ACTUAL", "ERROR",
    ]  # fmt: skip
    rows = [header]
    for body in _rayjobs(cluster, None):
        rayjob = RayJob(body)
        notes, labels = rayjob.annotations, rayjob.labels
        row = [
            notes.get(contract.WORKLOAD) or labels.get(contract.WORKLOAD),
            notes.get(contract.PREDICTED_RUNTIME),
            _duration((_read_json(notes.get(contract.PREDICTION)) or {}).get("upper")),
            labels.get(contract.DEADLINE_STATUS),
            notes.get(contract.ETA),
            _duration(notes.get(contract.ACTUAL_RUNTIME_SECONDS)),
            "yes" if notes.get(contract.ERROR) else None,
        ]
        rows.append(([rayjob.namespace] if cluster.namespace is None else []) + [body["metadata"]["name"]] + row)
    widths = [max(len(row[i] or "<none>") for row in rows) for i in range(len(header))]
    return "\n".join(
        "   ".join(f"{v or '<none>':<{w}}" for v, w in zip(row, widths, strict=True)).rstrip() for row in rows
    )


def what_if_rayjob(cluster: Cluster, args: argparse.Namespace) -> str:
    """The live job predicted at every size asked (the planner's by default), as the operator forecasts it.

    From the profile the operator predicts it from (``_profiles``), with the settings of the operator's
    ``RAYJOB_ADVISOR_*`` variables that a forecast depends on (prices, default workload) and the labels of the
    job's namespace (where the user may read them).
    """
    (body,) = _rayjobs(cluster, args.name)
    rayjob = RayJob(body)
    config = settings(advice_config)
    named = (_read_json(rayjob.annotations.get(contract.PREDICTION)) or {}).get("profile")
    where, _, named_workload = str(named or "").rpartition("/")
    policy = config.policy(_namespace_labels(cluster, rayjob.namespace)).model_copy(
        update={"default_workload": config.default_workload or named_workload or None}
    )
    shared = (where,) if where and where not in ("shipped", rayjob.namespace) else ()
    store = _profiles(cluster, rayjob.namespace, shared, application.job_inputs(rayjob, policy).workload)
    clusters = functools.partial(kubeapi.read_raycluster, cluster.api)  # a clusterSelector job's RayCluster
    seen = application.forecast(body, store, policy=policy, may_resize=False, now=contract.now(), clusters=clusters)
    job, group = seen.job, seen.job.scale_group
    size = planner.describe_size(group.replicas, job.gpus_per_worker) if group else "the head pod alone"
    return "\n".join([
        f"RayJob {rayjob.namespace}/{args.name}: profile {seen.profile} ({model_summary(seen.model)})",
        f"as it is, {size} ({job.workers} Ray Train workers): {runtime_summary(seen.prediction, seen.startup)}",
        "",
        f"what if ({f'group {group.name!r}' if group else 'head pod'}):",
        *what_if_table(seen.what_if(args.replicas, args.gpus)),
        *([f"\nthe operator leaves this RayJob alone: {seen.left_alone}"] if seen.left_alone else []),
    ])  # fmt: skip


def _profiles(cluster: Cluster, namespace: str, shared: tuple[str, ...], workload: str | None) -> ProfileStore:
    """The profiles the operator may predict a job of ``workload`` in ``namespace`` from, in the operator's order,
    fitted here when asked (on the runs of the job's accelerator, or of the stand-in it falls back to).

    Its workload's RuntimeProfile in the job's namespace, or where the job's ``prediction`` says the
    operator found it (a ``shared`` namespace), else the shipped profile. A RuntimeProfile the operator
    cannot use is left out, as the operator leaves it out.
    """
    store = ProfileStore(shared_namespaces=shared, fits_when_asked=True)
    for item in kubeapi.list_profiles(cluster.api, (namespace, *shared)):
        if (item.get("spec") or {}).get("workload") == workload:
            with contextlib.suppress(UserError):
                runs = runs_from_k8s(item.get("spec"), item.get("status"))
                store.put(item["metadata"]["namespace"], item["metadata"]["name"], *runs)
    return store


def _namespace_labels(cluster: Cluster, namespace: str) -> dict[str, str]:
    """The labels of the job's namespace (its mode, its hooks); none where the user may not read it."""
    core = kubernetes.client.CoreV1Api(cluster.api.api_client)
    try:
        found = kubeapi.retried(core.read_namespace, namespace)
    except kubernetes.client.ApiException as exc:
        if exc.status in (403, 404):
            return {}
        raise
    return dict((found.metadata.labels if found.metadata else None) or {})


def _server_error(exc: kubernetes.client.ApiException) -> str:
    """kubectl's line for an API error: ``Error from server (NotFound): rayjobs.ray.io "x" not found``."""
    status = _read_json(exc.body) or {}
    return f"Error from server ({status.get('reason') or exc.reason}): {status.get('message') or exc.body}"


def main(argv: Sequence[str] | None = None) -> int:
    hide_library_warnings()
    args = _parser().parse_args(argv)
    handler: Callable[[Cluster, argparse.Namespace], str] = args.handler
    try:
        print(handler(connect(args), args))
        sys.stdout.flush()  # here, where a reader that has gone is caught
    except BrokenPipeError:
        return closed_pipe()
    except _NoResources as exc:
        print(exc, file=sys.stderr)
    except kubernetes.client.ApiException as exc:
        print(_server_error(exc), file=sys.stderr)
        return 1
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        print(f"error: Unable to connect to the server: {exc}", file=sys.stderr)
        return 1
    except (UserError, ApiUnavailable) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
