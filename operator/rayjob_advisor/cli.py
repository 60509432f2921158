"""The ``rayjob-advisor`` command line (DESIGN §8)."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import pathlib
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any

import pydantic
import yaml

from rayjob_advisor import contract, features, planner, prediction, profiles
from rayjob_advisor.config import OperatorConfig, load_config
from rayjob_advisor.models import evaluation
from rayjob_advisor.models.runtime import RuntimeModel
from rayjob_advisor.observations import Observation, ObservationsError, read_observations


class CliError(Exception):
    """A problem the user can fix; printed without a traceback, exit status 2."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except (
        CliError,
        ObservationsError,
        contract.AnnotationError,
        features.UnpredictableJob,
        profiles.UnknownWorkload,
        evaluation.NotEnoughData,
        OSError,
        yaml.YAMLError,
    ) as exc:
        print(f"rayjob-advisor: error: {exc}", file=sys.stderr)
        return 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rayjob-advisor", description=__doc__)
    commands = parser.add_subparsers(required=True, metavar="COMMAND")

    def data_options(command: argparse.ArgumentParser) -> None:
        command.add_argument(
            "--data",
            type=pathlib.Path,
            help="observations CSV to fit on (default: the shipped profile of the workload)",
        )
        command.add_argument("--workload", help="use only this workload's runs when the CSV holds several")
        command.add_argument(
            "--skip-bad-rows", action="store_true", help="report bad CSV rows on stderr and go on without them"
        )
        command.add_argument("--format", choices=("table", "json"), default="table")

    evaluate = commands.add_parser("evaluate", help="score every candidate model on every split")
    data_options(evaluate)
    evaluate.add_argument("--test", type=pathlib.Path, help="fit on all of --data and score on this CSV instead")
    evaluate.set_defaults(handler=_evaluate)

    fit = commands.add_parser("fit", help="select and fit the model of a profile")
    data_options(fit)
    fit.set_defaults(handler=_fit)

    predict = commands.add_parser("predict", help="predict a RayJob's runtime, with a what-if table")
    predict.add_argument("-f", "--filename", required=True, type=pathlib.Path, help="RayJob manifest (YAML)")
    data_options(predict)
    predict.add_argument("--confidence", type=float, help="upper-bound confidence (default: the RayJob's, else 0.9)")
    predict.set_defaults(handler=_predict)

    profile = commands.add_parser(
        "profile",
        help="run a profiling sweep of real Ray Train jobs, or emit a RuntimeProfile from a CSV",
        description="Sweep: every combination of the list options, --repeats times, appended to --out "
        "(an interrupted sweep resumes; failed runs go to OUT.failures.csv). "
        "--emit-profile: print a RuntimeProfile manifest of --data instead.",
    )
    profile.add_argument(
        "--workload", help="built-in workload (digits-cnn, tabular-mlp), or the name of --train-func's"
    )
    profile.add_argument("--train-func", help="your own training function, module:function")
    profile.add_argument("--workers", type=integers, help="worker counts, e.g. 1,2,4")
    profile.add_argument("--dataset-sizes", type=integers, help="samples, e.g. 8000,16000")
    profile.add_argument("--epochs", type=integers, default=[1], help="epochs (default 1)")
    profile.add_argument("--batch-size", type=integers, help="global batch sizes, e.g. 64,256")
    profile.add_argument("--cpus-per-worker", type=_numbers, default=[1.0], help="CPUs per worker (default 1)")
    profile.add_argument("--gpus-per-worker", type=_gpus, default=0.0, help="GPUs per worker (default 0)")
    profile.add_argument("--repeats", type=_count, default=3, help="runs per configuration (default 3)")
    profile.add_argument("--address", help="an existing Ray cluster (default: start Ray here)")
    profile.add_argument("--storage-path", help="Ray Train storage (default: a temporary folder)")
    profile.add_argument("--out", type=pathlib.Path, help="observations CSV to append to")
    profile.add_argument("--no-progress", action="store_true", help="no progress bar")
    profile.add_argument("--emit-profile", action="store_true", help="print a RuntimeProfile manifest of --data")
    profile.add_argument("--data", type=pathlib.Path, help="with --emit-profile: the observations CSV")
    profile.add_argument("--skip-bad-rows", action="store_true", help=argparse.SUPPRESS)
    profile.set_defaults(handler=_profile)

    run = commands.add_parser("run", help="run the operator (settings also from RAYJOB_ADVISOR_* variables)")
    run.add_argument("--role", choices=("controller", "webhook"), help="default: controller")
    run.add_argument(
        "--namespace", action="append", dest="namespaces", help="watch this namespace (repeatable; default all)"
    )
    run.add_argument(
        "--shared-profile-namespace",
        action="append",
        dest="shared_profile_namespaces",
        help="RuntimeProfiles in this namespace serve jobs of namespaces without their own (repeatable)",
    )
    run.add_argument("--log-format", choices=("text", "json"))
    run.add_argument("--liveness-port", type=int, help="port of /healthz (0: none; default 8080)")
    run.add_argument("--default-workload", help="profile for RayJobs that name no workload")
    run.add_argument("--kube-api", help="API server URL, e.g. of kubectl proxy (default: in-cluster or kubeconfig)")
    run.add_argument("--webhook-port", type=int, help="webhook role: HTTPS port (default 8443)")
    run.add_argument("--tls-cert-file", help="webhook role: certificate (PEM)")
    run.add_argument("--tls-key-file", help="webhook role: private key (PEM)")
    run.set_defaults(handler=_run)
    return parser


def integers(text: str) -> list[int]:
    """Positive integers separated by commas (``--workers 1,2,4``; the kubectl plugin's ``--replicas``)."""
    values = [int(part) for part in text.split(",") if part.strip()]
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected positive integers separated by commas")
    return values


def _numbers(text: str) -> list[float]:
    values = [float(part) for part in text.split(",") if part.strip()]
    if not values or not all(math.isfinite(v) and v > 0 for v in values):
        raise argparse.ArgumentTypeError(f"{text!r}: expected positive numbers separated by commas")
    return values


def _count(text: str) -> int:
    """A positive integer (``--repeats``): zero runs would start Ray for nothing."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a positive integer")
    return value


def _gpus(text: str) -> float:
    """GPUs per worker: finite and not negative (Ray would wait forever for a negative amount)."""
    value = float(text)
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"{text!r}: expected a number of GPUs, 0 or more")
    return value


def _load(args: argparse.Namespace, path: pathlib.Path, workload: str | None) -> list[Observation]:
    try:
        observations, problems = read_observations(path, skip_bad_rows=args.skip_bad_rows)
    except UnicodeDecodeError:
        raise CliError(f"{path}: not an observations CSV (not UTF-8 text)") from None
    for problem in problems:
        print(f"rayjob-advisor: warning: skipped {problem}", file=sys.stderr)
    chosen = profiles.observations_for_workload(observations, workload)
    if not chosen:
        raise CliError(f"{path}: no usable observations")
    return chosen


def _emit(args: argparse.Namespace, document: dict[str, Any], table: str) -> None:
    print(json.dumps(document, indent=2) if args.format == "json" else table)


def _evaluate(args: argparse.Namespace) -> None:
    observations = _load(args, args.data or profiles.shipped_data(args.workload), args.workload)
    test = _load(args, args.test, args.workload) if args.test else None
    result = evaluation.evaluate(observations, test=test)
    _emit(args, result.to_json(), evaluation_table(result))


def _percent(value: float) -> str:
    return f"{100 * value:.1f}%"


def evaluation_table(result: evaluation.Evaluation) -> str:
    header = f"{'split':<20} {'model':<18} {'MAPE':>7} {'p90 APE':>8} {'under':>7} {'cover@0.9':>9} {'n':>5}"
    lines = [header, "-" * len(header)]
    for split, models in result.splits.items():
        for name, s in models.items():
            mark = " *" if name == result.selected else ""
            coverage = "-" if s.coverage is None else _percent(s.coverage)
            lines.append(
                f"{split:<20} {name:<18} {_percent(s.mape):>7} {_percent(s.p90_ape):>8} "
                f"{_percent(s.underprediction_rate):>7} {coverage:>9} {s.n_test:>5}{mark}"
            )
    lines += [f"skipped {split}: {why}" for split, why in result.skipped.items()]
    lines.append(f"selected: {result.selected} (lowest MAPE averaged over the cross-validation splits; marked *)")
    return "\n".join(lines)


def _fit(args: argparse.Namespace) -> None:
    observations = _load(args, args.data or profiles.shipped_data(args.workload), args.workload)
    started = time.perf_counter()
    model = RuntimeModel().fit(observations)
    seconds = time.perf_counter() - started
    per_split = {split: scores[model.selected_].mape for split, scores in model.evaluation_.splits.items()}
    document = {
        "selected": model.selected_,
        "cv_mape": model.cv_mape_,
        "split_mape": per_split,
        "n_samples": model.n_samples_,
        "fit_seconds": round(seconds, 3),
    }
    table = "\n".join(
        [f"selected model: {model.selected_}", f"cross-validated MAPE: {_percent(model.cv_mape_)} (mean over splits)"]
        + [f"  {split:<20} {_percent(mape)}" for split, mape in per_split.items()]
        + [f"samples: {model.n_samples_}", f"fitted in {seconds:.1f}s"]
    )
    _emit(args, document, table)


def _profile(args: argparse.Namespace) -> None:
    if args.emit_profile:
        if args.data is None:
            raise CliError("--emit-profile needs --data FILE.csv")
        observations = _load(args, args.data, args.workload)
        workload = profiles.profile_name(observations, args.workload, args.data)
        print(yaml.safe_dump(profiles.runtime_profile_manifest(workload, observations), sort_keys=False), end="")
        return
    missing = [
        f"--{name.replace('_', '-')}"
        for name in ("workload", "workers", "dataset_sizes", "batch_size", "out")
        if getattr(args, name) is None
    ]
    if missing:
        raise CliError(f"a sweep needs {', '.join(missing)}")
    try:
        from rayjob_advisor.profiling import harness  # Ray Train and PyTorch load only for sweeps
    except ImportError as exc:
        raise CliError(f"profiling needs the 'profile' extra: pip install 'rayjob-advisor[profile]' ({exc})") from None

    try:
        train = harness.load_train_function(args.train_func or args.workload)
    except (ValueError, ImportError) as exc:
        raise CliError(str(exc)) from None
    specs = harness.grid(
        args.workload, args.workers, args.dataset_sizes, args.epochs, args.batch_size,
        args.cpus_per_worker, args.gpus_per_worker, args.repeats,
    )  # fmt: skip
    with harness.ray_session(args.address), tempfile.TemporaryDirectory(prefix="rayjob-advisor-") as scratch:
        runner = harness.RayTrainRunner(train, storage_path=args.storage_path or scratch)
        summary = harness.sweep(specs, runner, args.out, harness.provenance(), progress=not args.no_progress)
    print(
        f"{summary.finished} runs finished, {summary.skipped} already in {args.out}, {summary.failed} failed"
        + (f" (see {harness.failures_path(args.out)})" if summary.failed else "")
    )


def _run(args: argparse.Namespace) -> None:
    import asyncio

    import kopf

    from rayjob_advisor import run  # kopf and the Kubernetes client load only for the operator

    flags = {key: value for key, value in vars(args).items() if key in OperatorConfig.model_fields}
    try:
        config = load_config(flags)
    except pydantic.ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'settings'}: {e['msg']}" for e in exc.errors(include_url=False)
        )
        raise CliError(f"bad settings: {problems}") from None
    log_format = kopf.LogFormat.JSON if config.log_format == "json" else kopf.LogFormat.FULL
    kopf.configure(verbose=False, log_format=log_format)
    asyncio.run(kopf.operator(**run.operator_arguments(config)))


_YAML_STRING = "tag:yaml.org,2002:str"
_YAML_TYPES = {"bool": "a boolean", "int": "an integer", "float": "a number", "timestamp": "a timestamp"}


def _read_rayjob(path: pathlib.Path) -> dict[str, Any]:
    """The one RayJob of a (possibly multi-document) manifest file, its metadata as the API server decodes it.

    Annotation and label values must be strings. YAML 1.1 reads an unquoted
    ``off``/``on``/``yes``/``no`` as a boolean, ``2026-12-02T18:00:00Z`` as a
    timestamp and ``16000`` as a number, which kubectl would reject: the error
    shows the value quoted, as the user wrote it (the YAML node's own text).
    """
    try:
        with path.open(encoding="utf-8") as stream:
            nodes = list(yaml.compose_all(stream, Loader=yaml.SafeLoader))
    except UnicodeDecodeError:
        raise CliError(f"{path}: not a YAML manifest (not UTF-8 text)") from None
    loader = yaml.SafeLoader("")
    documents = [(node, loader.construct_document(node)) for node in nodes]
    rayjobs = [(node, d) for node, d in documents if isinstance(d, dict) and d.get("kind") == "RayJob"]
    if len(rayjobs) != 1:
        raise CliError(f"{path}: expected exactly one RayJob document, found {len(rayjobs)}")
    node, rayjob = rayjobs[0]
    metadata = _child(node, "metadata")
    if not isinstance(rayjob.get("metadata") or {}, dict):
        raise CliError(f"{path}: the RayJob's metadata is not a map")
    for field in ("annotations", "labels"):
        values = _child(metadata, field)
        if values is not None and values.tag != "tag:yaml.org,2002:null" and not isinstance(values, yaml.MappingNode):
            raise CliError(f"{path}:{values.start_mark.line + 1}: metadata.{field} is not a map")
        for key, value in values.value if isinstance(values, yaml.MappingNode) else []:
            where = f"{path}:{key.start_mark.line + 1}: metadata.{field}"
            if key.tag != _YAML_STRING:
                raise CliError(f"{where}: key {key.value}: {_not_a_string(key)}")
            if value.tag != _YAML_STRING:
                raise CliError(f"{where}: {key.value}: {_not_a_string(value, key.value)}")
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


def _confidence(value: float) -> float:
    """``--confidence``, held to the bounds of the annotation."""
    try:
        return pydantic.TypeAdapter(contract.Confidence).validate_python(value)
    except pydantic.ValidationError as exc:
        raise CliError(f"--confidence {value:g}: {exc.errors(include_url=False)[0]['msg']}") from None


def _predict(args: argparse.Namespace) -> None:
    """Every input is checked before the model is fitted: a mistake costs no waiting."""
    rayjob = _read_rayjob(args.filename)
    metadata = rayjob.get("metadata") or {}
    inputs = contract.parse_inputs(metadata.get("annotations"), metadata.get("labels"))
    if args.confidence is not None:
        inputs = inputs.model_copy(update={"confidence": _confidence(args.confidence)})
    try:
        job = features.features_from_rayjob(rayjob, inputs)
    except (AttributeError, TypeError, KeyError, IndexError) as exc:  # a field of the wrong type in the spec
        raise CliError(
            f"{args.filename}: not a RayJob KubeRay's CRD accepts ({type(exc).__name__}: {exc}); "
            "`kubectl apply --dry-run=server -f` names the field"
        ) from None
    prediction.require_predictable(job)
    workload = job.workload or args.workload
    data = args.data or profiles.shipped_data(workload)
    observations = _load(args, data, workload)
    model = RuntimeModel().fit(observations)
    profile = profiles.profile_name(observations, workload, data)
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    prices = planner.Prices()
    result, recommendation = prediction.forecast(rayjob, inputs, job, model, profile, prices, now)
    rows = prediction.what_if(job, model, inputs.confidence, model.startup_seconds_, prices)
    notes = result.annotations()
    document = {
        "rayjob": {"namespace": metadata.get("namespace", "default"), "name": metadata.get("name")},
        "features": job.model_dump(mode="json"),
        "prediction": result.model_dump(mode="json"),
        "what_if": [row.model_dump() for row in rows],
    }
    if recommendation is not None:
        notes[contract.RECOMMENDATION] = recommendation.annotation()
        document["recommendation"] = json.loads(recommendation.annotation())
    document["annotations"] = notes
    _emit(args, document, _prediction_table(job, model, result, rows, recommendation, notes))


def _prediction_table(
    job: features.Features,
    model: RuntimeModel,
    result: prediction.Prediction,
    rows: list[planner.Option],
    recommendation: planner.Recommendation | None,
    notes: dict[str, str],
) -> str:
    group = job.scale_group
    where = f"group {group.name!r}: {group.replicas} replicas x {group.num_of_hosts} host(s)" if group else "head pod"
    used = ", ".join(f"{k}={v}" for k, v in result.features.items())
    lines = [
        f"profile: {result.profile} ({model.n_samples_} runs; model {model.selected_}, "
        f"cross-validated MAPE {_percent(model.cv_mape_)})",
        f"features: {used} ({where})",
        f"predicted runtime: {contract.format_duration(result.p50)} (median), "
        f"{contract.format_duration(result.upper)} (upper bound at {result.confidence:g}), "
        f"plus about {contract.format_duration(model.startup_seconds_)} start-up",
    ]
    if result.assumed:
        assumed = ", ".join(f"{k}={v:g}" for k, v in result.assumed.items())
        lines.append(f"assumed: {assumed} (the profile has no runs with the job's value)")
    if job.resize_blocker:
        lines.append(f"not resizable: {job.resize_blocker}")
    if recommendation is not None:
        verdict = "meets" if recommendation.meets_deadline else "MISSES"
        lines.append(f"decision: {recommendation.size} ({verdict} the deadline) - {recommendation.reason}")
    lines += ["", f"what if ({where.split(':')[0]}):", *what_if_table(rows)]
    lines += ["", "annotations it would write:"] + [f"  {k}: {v}" for k, v in notes.items()]
    return "\n".join(lines)


def what_if_table(rows: Sequence[planner.Option]) -> list[str]:
    """The what-if table, a size a row (``predict`` and ``kubectl rayjob-advisor what-if`` print it)."""
    lines = [f"{'replicas':>8} {'GPUs/worker':>11} {'workers':>8} {'median':>10} {'upper':>10} {'cost':>10}"]
    for row in rows:
        lines.append(
            f"{row.replicas:>8} {row.gpus_per_worker:>11g} {row.workers:>8} {contract.format_duration(row.p50):>10} "
            f"{contract.format_duration(row.upper):>10} {row.cost:>10.4f}"
        )
    return lines


if __name__ == "__main__":
    sys.exit(main())
