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
from rayjob_advisor.config import OperatorConfig, load_config, load_prices
from rayjob_advisor.models import evaluation, transfer
from rayjob_advisor.models.runtime import RuntimeModel
from rayjob_advisor.observations import (
    Observation,
    ObservationsError,
    choose_accelerator,
    measured_accelerators,
    read_observations,
    runs_on,
)


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
    for command in (evaluate, fit):
        command.add_argument(
            "--accelerator",
            type=_accelerator,
            help="use this accelerator's runs when the data has several (default: the most measured)",
        )

    predict = commands.add_parser("predict", help="predict a RayJob's runtime, with a what-if table")
    predict.add_argument("-f", "--filename", required=True, type=pathlib.Path, help="RayJob manifest (YAML)")
    data_options(predict)
    predict.add_argument("--confidence", type=float, help="upper-bound confidence (default: the RayJob's, else 0.9)")
    predict.add_argument(
        "--accelerators",
        type=_accelerators,
        help="also what if the job ran on each of these accelerators, e.g. a100,h100: one row per accelerator and "
        "size, from that accelerator's runs, priced per accelerator (RAYJOB_ADVISOR_ACCELERATOR_GPU_HOUR_PRICES)",
    )
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
    profile.add_argument(
        "--accelerator",
        type=_accelerator,
        help="the GPU model the runs are measured on, recorded with them (e.g. a100)",
    )
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


def _accelerator(text: str) -> str:
    """An accelerator name, canonical (``A100`` and ``nvidia-tesla-a100`` are ``a100``)."""
    name = contract.canonical_accelerator(text)
    if not name:
        raise argparse.ArgumentTypeError(f"{text!r}: expected an accelerator name, e.g. a100")
    return name


def _accelerators(text: str) -> list[str]:
    """Accelerator names separated by commas, canonical, each once, in the order given."""
    names = [_accelerator(part) for part in text.split(",") if part.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"{text!r}: expected accelerator names separated by commas, e.g. a100,h100")
    return list(dict.fromkeys(names))


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


def _on_accelerator(args: argparse.Namespace, observations: list[Observation]) -> tuple[str | None, list[Observation]]:
    """The runs of one accelerator (``--accelerator``, else the most measured): a model never mixes accelerators."""
    choice = choose_accelerator(measured_accelerators(observations), args.accelerator)
    measured = ", ".join(choice.measured)
    if choice.job is not None and choice.assumed is not None:
        raise CliError(f"--accelerator {choice.job}: the data has no runs on it (measured on {measured})")
    if choice.job is None and len(choice.measured) > 1:
        print(
            f"rayjob-advisor: note: runs of {measured}: using those on {choice.used} (--accelerator)", file=sys.stderr
        )
    return choice.used, runs_on(observations, choice.used)


def _evaluate(args: argparse.Namespace) -> None:
    data = _load(args, args.data or profiles.shipped_data(args.workload), args.workload)
    accelerator, observations = _on_accelerator(args, data)
    test = runs_on(_load(args, args.test, args.workload), accelerator) if args.test else None
    result = evaluation.evaluate(observations, test=test)
    _emit(args, result.to_json(), evaluation_table(result))


def _percent(value: float) -> str:
    return f"{100 * value:.1f}%"


def evaluation_table(result: evaluation.Evaluation) -> str:
    """One row per split and candidate; ``bands@0.9``: the coverage per node count (``nodes:coverage/runs``)."""
    header = f"{'split':<24} {'model':<18} {'MAPE':>7} {'p90 APE':>8} {'under':>7} {'cover@0.9':>9} {'n':>5}  bands@0.9"
    lines = [header, "-" * len(header)]
    for split, models in result.splits.items():
        for name, s in models.items():
            mark = " *" if name == result.selected else ""
            coverage = "-" if s.coverage is None else _percent(s.coverage)
            bands = " ".join(
                f"{band.removeprefix('nodes=')}:{_percent(b.coverage)}/{b.n_test}"
                for band, b in (s.bands or {}).items()
            )
            lines.append(
                f"{split:<24} {name:<18} {_percent(s.mape):>7} {_percent(s.p90_ape):>8} "
                f"{_percent(s.underprediction_rate):>7} {coverage:>9} {s.n_test:>5}  {bands or '-'}{mark}"
            )
    lines += [f"skipped {split}: {why}" for split, why in result.skipped.items()]
    lines += [f"disqualified {name}: {why}" for name, why in result.disqualified.items()]
    lines.append(
        f"selected: {result.selected} (lowest MAPE over the cross-validation splits, worker extrapolation "
        "weighted x2; marked *)"
    )
    return "\n".join(lines)


def _fit(args: argparse.Namespace) -> None:
    data = _load(args, args.data or profiles.shipped_data(args.workload), args.workload)
    accelerator, observations = _on_accelerator(args, data)
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
        "accelerator": accelerator,
    }
    table = "\n".join(
        [f"selected model: {model.selected_}", f"cross-validated MAPE: {_percent(model.cv_mape_)} (mean over splits)"]
        + [f"  {split:<20} {_percent(mape)}" for split, mape in per_split.items()]
        + [f"samples: {model.n_samples_}", f"fitted in {seconds:.1f}s"]
        + ([f"accelerator: {accelerator}"] if accelerator else [])
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
        args.cpus_per_worker, args.gpus_per_worker, args.repeats, args.accelerator,
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

    from rayjob_advisor import kubeapi, run  # kopf and the Kubernetes client load only for the operator

    flags = {key: value for key, value in vars(args).items() if key in OperatorConfig.model_fields}
    try:
        config = load_config(flags)
    except pydantic.ValidationError as exc:
        raise CliError(f"bad settings: {contract.validation_problems(exc, 'settings')}") from None
    log_format = kopf.LogFormat.JSON if config.log_format == "json" else kopf.LogFormat.FULL
    try:
        kubeapi.client(config.kube_api)  # before kopf, which would retry a missing kubeconfig forever
    except kubeapi.NoCluster as exc:
        raise CliError(str(exc)) from None
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
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    inputs = contract.parse_inputs(metadata.get("annotations"), metadata.get("labels")).within_reach(now)
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
    prices = _prices()
    observations = _load(args, data, workload)
    profile = profiles.profile_name(observations, workload, data)
    choice = choose_accelerator(measured_accelerators(observations), job.accelerator)
    model = transfer.model_on(observations, choice.used)
    result, recommendation = prediction.forecast(
        rayjob, inputs, job, model, profile, prices, now, assumed_accelerator=choice.assumed
    )
    rows = prediction.what_if(job, model, inputs.confidence, prices)
    if warning := choice.warning(profile):
        print(f"rayjob-advisor: warning: {warning}", file=sys.stderr)
    notes = result.annotations()
    document: dict[str, Any] = {
        "rayjob": {"namespace": metadata.get("namespace", "default"), "name": metadata.get("name")},
        "features": job.model_dump(mode="json"),
        "prediction": result.model_dump(mode="json"),
        "what_if": [row.model_dump() for row in rows],
    }
    if recommendation is not None:
        notes[contract.RECOMMENDATION] = recommendation.annotation()
        document["recommendation"] = json.loads(recommendation.annotation())
    document["annotations"] = notes
    table = _prediction_table(job, model, result, rows, recommendation, notes)
    if args.accelerators:
        compared, missing = prediction.compare_accelerators(
            rayjob, inputs, job, observations, args.accelerators, prices, now, {choice.used: model}
        )
        document["accelerators"] = {"what_if": [row.model_dump() for row in compared], "missing": missing}
        table += "\n\n" + _accelerator_table(compared, missing, measured_accelerators(observations))
    _emit(args, document, table)


def _prices() -> planner.Prices:
    """The prices the operator would plan with (its ``RAYJOB_ADVISOR_*_PRICE(S)`` variables)."""
    try:
        return load_prices()
    except pydantic.ValidationError as exc:
        raise CliError(f"bad prices: {contract.validation_problems(exc, '')}") from None


def _accelerator_table(
    rows: list[prediction.AcceleratorOption], missing: dict[str, str], measured: tuple[str, ...]
) -> str:
    """The what-if rows per accelerator, and a line for each accelerator the profile has no runs on."""
    lines = ["what if on other accelerators (each from its own runs):"]
    if not measured:
        lines.append(
            "  note: the profile's runs name no accelerator: every accelerator is predicted from the same runs"
        )
    lines.append(f"{'accelerator':<12} {_SIZE_HEADER} {'deadline':>9}")
    for row in rows:
        meets = "-" if row.meets_deadline is None else "meets" if row.meets_deadline else "MISSES"
        lines.append(f"{row.accelerator:<12} {_size_cells(row)} {meets:>9}")
    lines += [f"{name:<12} no rows: {why}" for name, why in missing.items()]
    return "\n".join(lines)


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
        f"profile: {result.profile} ({model_summary(model)})",
        f"features: {used} ({where})",
        f"predicted runtime: {runtime_summary(result, float(model.startup([job])[0]))}",
    ]
    lines += [_batch_line(result.features), _placement_line(result.features)]
    if result.assumed:
        lines.append(f"assumed: {assumptions_summary(result)}")
    if job.resize_blocker:
        lines.append(f"not resizable: {job.resize_blocker}")
    if recommendation is not None:
        verdict = "meets" if recommendation.meets_deadline else "MISSES"
        lines.append(f"decision: {recommendation.size} ({verdict} the deadline) - {recommendation.reason}")
    lines += ["", f"what if ({where.split(':')[0]}):", *what_if_table(rows)]
    lines += ["", "annotations it would write:"] + [f"  {k}: {v}" for k, v in notes.items()]
    return "\n".join(lines)


def model_summary(model: RuntimeModel) -> str:
    """``540 runs; model sync-sgd, cross-validated MAPE 5.0%`` (``predict`` and the kubectl plugin say it)."""
    return f"{model.n_samples_} runs; model {model.selected_}, cross-validated MAPE {_percent(model.cv_mape_)}"


def assumptions_summary(result: prediction.Prediction) -> str:
    """What the model assumed, and whence (``predict`` and the kubectl plugin's ``describe`` say it)."""
    return f"{result.assumptions} (from the profile: not in the job, or never varied in the profile)"


def runtime_summary(result: prediction.Prediction, startup: float) -> str:
    """The median, the upper bound at its confidence and the job's expected start-up, in Go durations."""
    return (
        f"{contract.format_duration(result.p50)} (median), "
        f"{contract.format_duration(result.upper)} (upper bound at {result.confidence:g}), "
        f"plus about {contract.format_duration(startup)} start-up"
    )


def what_if_table(rows: Sequence[planner.Option]) -> list[str]:
    """The what-if table, a size a row (``predict`` and ``kubectl rayjob-advisor what-if`` print it)."""
    return [_SIZE_HEADER, *(_size_cells(row) for row in rows)]


_SIZE_HEADER = (
    f"{'replicas':>8} {'GPUs/worker':>11} {'workers':>8} {'start-up':>10} {'median':>10} {'upper':>10} {'cost':>10}"
)


def _size_cells(row: planner.Option) -> str:
    """A size's cells of a what-if table: its size, expected start-up, runtimes and cost."""
    durations = " ".join(f"{contract.format_duration(seconds):>10}" for seconds in (row.startup, row.p50, row.upper))
    return f"{row.replicas:>8} {row.gpus_per_worker:>11g} {row.workers:>8} {durations} {row.cost:>10.4f}"


def _batch_line(used: dict[str, Any]) -> str:
    """Which batch the job gave and which one a resize keeps (the batch rule of ``contract``)."""
    if used.get("batch_size") is None:
        return "batch: not given; a resize keeps the per-worker batch"
    return (
        f"batch: {used['batch_size']:g} global = {used['batch_size_per_worker']:g} per worker x {used['workers']} "
        f"workers; a resize keeps the {used['batch_held']} batch fixed"
    )


def _placement_line(used: dict[str, Any]) -> str:
    hint = used.get("placement")
    return f"placement: {hint} (from the RayJob)" if hint else "placement: the RayJob gives no hint"


if __name__ == "__main__":
    sys.exit(main())
