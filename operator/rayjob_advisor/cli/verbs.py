"""The ``rayjob-advisor`` command line: evaluate, fit, predict, plan, profile, run.

``predict`` presents ``application.forecast`` — what the operator would write
on the job once created, from the same profile (the shipped one, or
``--data``), with the settings of the operator's ``RAYJOB_ADVISOR_*``
variables that a forecast depends on (``config.ADVICE_SETTINGS``).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import pathlib
import signal
import sys
import tempfile
import time
import types
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pydantic
import yaml

from rayjob_advisor import __version__, application, contract
from rayjob_advisor.advice import prediction
from rayjob_advisor.cli.manifests import read_rayjob
from rayjob_advisor.cli.tables import (
    accelerator_table,
    evaluation_table,
    percent,
    plan_table,
    prediction_table,
    weights_lines,
)
from rayjob_advisor.errors import UsageError, UserError, hide_library_warnings
from rayjob_advisor.kube.config import OperatorConfig, advice_config, load_config
from rayjob_advisor.kuberay.rayjob import RayJob
from rayjob_advisor.models import evaluation, transfer
from rayjob_advisor.models.evaluation import NotEnoughData
from rayjob_advisor.models.runtime import RuntimeModel
from rayjob_advisor.observations import (
    Observation,
    choose_accelerator,
    measured_accelerators,
    read_observations,
    runs_on,
)
from rayjob_advisor.planning import plan as planning
from rayjob_advisor.profiles.codec import runtime_profile_manifest
from rayjob_advisor.profiles.shipped import observations_for_workload, profile_name, shipped_data
from rayjob_advisor.profiles.store import FittedProfile, ProfileStore


def main(argv: Sequence[str] | None = None) -> int:
    hide_library_warnings()
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        status = int(args.handler(args) or 0)
        sys.stdout.flush()  # here, where a reader that has gone is caught
        return status
    except BrokenPipeError:
        return closed_pipe()
    except (UserError, OSError) as exc:  # OSError: a file or connection of the user's that does not work
        print(f"rayjob-advisor: error: {exc}", file=sys.stderr)
        return 2


def closed_pipe() -> int:
    """The reader of our output has gone (``| head -1``): stop quietly, with the status of a tool SIGPIPE ends.

    stdout is pointed at /dev/null, so that Python's own flush at exit does not fail again (the recipe of
    Python's ``signal`` documentation).
    """
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 128 + signal.SIGPIPE


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rayjob-advisor", description=__doc__)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
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
        command.add_argument(
            "--format", choices=("table", "json"), default="table", help="table: for people; json: for programs"
        )

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
    predict.add_argument(
        "-f", "--filename", required=True, type=pathlib.Path, help="RayJob manifest (YAML); - reads standard input"
    )
    data_options(predict)
    predict.add_argument("--confidence", type=float, help="upper-bound confidence (default: the RayJob's, else 0.9)")
    predict.add_argument(
        "--accelerators",
        type=_accelerators,
        help="also what if the job ran on each of these accelerators, e.g. a100,h100: one row per accelerator and "
        "size, from that accelerator's runs, priced per accelerator (RAYJOB_ADVISOR_ACCELERATOR_GPU_HOUR_PRICES)",
    )
    predict.add_argument(
        "--cluster",
        type=pathlib.Path,
        help="the RayCluster manifest (YAML) a clusterSelector job runs on: predicted from its groups, never resized",
    )
    predict.set_defaults(handler=_predict)

    plan = commands.add_parser(
        "plan",
        help="choose the next profiling runs: the cheapest that predict the plan's targets",
        description="Reads a plan file (the candidate grid, the targets, a budget or a goal: "
        "docs/tutorials/profiling-plan.md), and the runs measured so far (--results), and prints the next runs, "
        "the cost so far and expected, and the expected error at the targets. --out writes the plan with them; "
        "`profile --plan` runs it to the end.",
    )
    plan.add_argument("plan_file", type=pathlib.Path, metavar="PLAN", help="the plan file (YAML or JSON)")
    plan.add_argument("--results", type=pathlib.Path, help="the observations CSV of the runs measured so far")
    plan.add_argument("--out", type=pathlib.Path, help="write the plan with its next runs here (.yaml or .json)")
    plan.add_argument(
        "--format", choices=("table", "json"), default="table", help="table: for people; json: for programs"
    )
    plan.add_argument(
        "--skip-bad-rows", action="store_true", help="report bad CSV rows on stderr and go on without them"
    )
    plan.set_defaults(handler=_plan)

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
    profile.add_argument(
        "--plan",
        type=pathlib.Path,
        help="follow this plan file instead of a grid: run its next runs, refit, plan again, until it stops "
        "(resumes from the runs already in --out)",
    )
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
    run.add_argument(
        "--advise-all-jobs",
        action="store_true",
        default=None,
        help="advise every RayJob, not only those that ask for it (docs/scope.md)",
    )
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


def _read(args: argparse.Namespace, path: pathlib.Path) -> list[Observation]:
    """Every usable run of an observations CSV; a row it skips is one warning line."""
    try:
        observations, problems = read_observations(path, skip_bad_rows=args.skip_bad_rows)
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not an observations CSV (not UTF-8 text)") from None
    for problem in problems:
        print(f"rayjob-advisor: warning: skipped {problem}", file=sys.stderr)
    return observations


def _load(args: argparse.Namespace, path: pathlib.Path, workload: str | None) -> list[Observation]:
    chosen = observations_for_workload(_read(args, path), workload)
    if not chosen:
        raise UsageError(f"{path}: no usable observations")
    return chosen


def _emit(args: argparse.Namespace, document: dict[str, Any], table: str) -> None:
    print(json.dumps(document, indent=2) if args.format == "json" else table)


def _on_accelerator(args: argparse.Namespace, observations: list[Observation]) -> tuple[str | None, list[Observation]]:
    """The runs of one accelerator (``--accelerator``, else the most measured): a model never mixes accelerators."""
    choice = choose_accelerator(measured_accelerators(observations), args.accelerator)
    measured = ", ".join(choice.measured)
    if choice.job is not None and choice.assumed is not None:
        raise UsageError(f"--accelerator {choice.job}: the data has no runs on it (measured on {measured})")
    if choice.job is None and len(choice.measured) > 1:
        print(
            f"rayjob-advisor: note: runs of {measured}: using those on {choice.used} (--accelerator)", file=sys.stderr
        )
    return choice.used, runs_on(observations, choice.used)


@contextlib.contextmanager
def _enough_runs() -> Iterator[None]:
    """Too few runs (or too alike) to fit or score: the models' ``NotEnoughData``, a user error here."""
    try:
        yield
    except NotEnoughData as exc:
        raise UsageError(str(exc)) from None


def _evaluate(args: argparse.Namespace) -> None:
    data = _load(args, args.data or shipped_data(args.workload), args.workload)
    accelerator, observations = _on_accelerator(args, data)
    test = runs_on(_load(args, args.test, args.workload), accelerator) if args.test else None
    with _enough_runs():
        result = evaluation.evaluate(observations, test=test)
    _emit(args, result.to_json(), evaluation_table(result))


def _fit(args: argparse.Namespace) -> None:
    data = _load(args, args.data or shipped_data(args.workload), args.workload)
    accelerator, observations = _on_accelerator(args, data)
    started = time.perf_counter()
    with _enough_runs():
        model = RuntimeModel().fit(observations)
    seconds = time.perf_counter() - started
    per_split = {split: scores[model.selected_].mape for split, scores in model.evaluation_.splits.items()}
    document = {
        "selected": model.selected_,
        "weights": model.evaluation_.weights,
        "cv_mape": model.cv_mape_,
        "split_mape": per_split,
        "n_samples": model.n_samples_,
        "fit_seconds": round(seconds, 3),
        "accelerator": accelerator,
    }
    table = "\n".join(
        [f"selected model: {model.selected_}", *weights_lines(model.evaluation_.weights)]
        + [f"cross-validated MAPE: {percent(model.cv_mape_)} (mean over splits)"]
        + [f"  {split:<24} {percent(mape)}" for split, mape in per_split.items()]
        + [f"samples: {model.n_samples_}", f"fitted in {seconds:.1f}s"]
        + ([f"accelerator: {accelerator}"] if accelerator else [])
    )
    _emit(args, document, table)


def _profile(args: argparse.Namespace) -> None:
    if args.emit_profile:
        if args.data is None:
            raise UsageError("--emit-profile needs --data FILE.csv")
        observations = _load(args, args.data, args.workload)
        workload = profile_name(observations, args.workload, args.data)
        print(yaml.safe_dump(runtime_profile_manifest(workload, observations), sort_keys=False), end="")
        return
    plan = planning.read_plan(args.plan) if args.plan else None
    required = ("out",) if plan else ("workload", "workers", "dataset_sizes", "batch_size", "out")
    missing = [f"--{name.replace('_', '-')}" for name in required if getattr(args, name) is None]
    if missing:
        raise UsageError(f"a {'plan' if plan else 'sweep'} needs {', '.join(missing)}")
    try:
        from rayjob_advisor.profiling import harness  # Ray Train and PyTorch load only for sweeps
    except ImportError as exc:
        extra = "pip install 'rayjob-advisor[profile]'"
        raise UsageError(f"profiling needs the 'profile' extra: {extra} ({exc})") from None

    try:
        train = harness.load_train_function(args.train_func or args.workload or (plan.workload if plan else ""))
    except (ValueError, ImportError) as exc:
        raise UsageError(str(exc)) from None
    if plan is not None:
        _follow(args, plan, harness, train)
        return
    specs = harness.grid(
        args.workload, args.workers, args.dataset_sizes, args.epochs, args.batch_size,
        args.cpus_per_worker, args.gpus_per_worker, args.repeats, args.accelerator,
    )  # fmt: skip
    with harness.RaySession(args.address) as session, tempfile.TemporaryDirectory(prefix="rayjob-advisor-") as scratch:
        runner = harness.RayTrainRunner(train, args.storage_path or scratch, session)
        summary = harness.sweep(specs, runner, args.out, harness.provenance(), progress=not args.no_progress)
    print(
        f"{summary.finished} runs finished, {summary.skipped} already in {args.out}, {summary.failed} failed"
        + (f" (see {harness.failures_path(args.out)})" if summary.failed else "")
    )


def _results(args: argparse.Namespace, path: pathlib.Path | None) -> list[Observation]:
    """The runs measured so far (none before the first, or without the file)."""
    return [] if path is None or not path.exists() else _read(args, path)


def _plan(args: argparse.Namespace) -> None:
    plan = planning.read_plan(args.plan_file)
    with _enough_runs():
        planned, _ = planning.advance(plan, _results(args, args.results))
    if args.out:
        planning.write_plan(args.out, planned)
    _emit(args, planned.model_dump(mode="json", include={"next", "status"}), plan_table(planned))


def _follow(
    args: argparse.Namespace, plan: planning.Plan, harness: types.ModuleType, train: Callable[[dict[str, Any]], None]
) -> None:
    """``profile --plan``: the plan's next runs, a refit and the next plan, until it stops (``planning.plan``).

    A batch of which no run finished stops it too: the failed runs are in OUT.failures.csv, and the same plan would
    choose them again."""
    finished = failed = 0
    with harness.RaySession(args.address) as session, tempfile.TemporaryDirectory(prefix="rayjob-advisor-") as scratch:
        runner = harness.RayTrainRunner(train, args.storage_path or scratch, session)
        while True:
            planned, _ = planning.advance(plan, _results(args, args.out))
            if not planned.next:
                break
            specs = [
                harness.RunSpec(run.workload, run.dataset_size, run.epochs, run.batch_size, run.workers,
                                run.cpus_per_worker, run.gpus_per_worker, run.repeat, run.accelerator)
                for run in planned.next
            ]  # fmt: skip
            summary = harness.sweep(specs, runner, args.out, harness.provenance(), progress=not args.no_progress)
            finished, failed = finished + summary.finished, failed + summary.failed
            if not summary.finished:
                break
    print(plan_table(planned))
    print(
        f"{finished} runs finished, {failed} failed" + (f" (see {harness.failures_path(args.out)})" if failed else "")
    )


def _run(args: argparse.Namespace) -> None:
    import asyncio

    import kopf

    from rayjob_advisor.kube import kubeapi, run  # kopf and the Kubernetes client load only for the operator

    flags = {key: value for key, value in vars(args).items() if key in OperatorConfig.model_fields}
    config = settings(lambda: load_config(flags))
    log_format = kopf.LogFormat.JSON if config.log_format == "json" else kopf.LogFormat.FULL
    kubeapi.client(config.kube_api)  # before kopf, which would retry a missing kubeconfig forever (NoCluster)
    kopf.configure(verbose=False, log_format=log_format)
    asyncio.run(kopf.operator(**run.operator_arguments(config)))


def _confidence(value: float) -> float:
    """``--confidence``, held to the bounds of the annotation."""
    try:
        return pydantic.TypeAdapter(contract.Confidence).validate_python(value)
    except pydantic.ValidationError as exc:
        raise UsageError(f"--confidence {value:g}: {exc.errors(include_url=False)[0]['msg']}") from None


@dataclasses.dataclass
class _RunsFile:
    """The profile ``predict --data`` predicts from: the file's runs of the job's workload, read and fitted once the
    job's inputs are checked (``application.ProfileSource``)."""

    args: argparse.Namespace
    observations: list[Observation] = dataclasses.field(default_factory=list)

    def fitted(self, namespace: str, workload: str | None, accelerator: str | None) -> FittedProfile:
        self.observations = _load(self.args, self.args.data, workload)
        choice = choose_accelerator(measured_accelerators(self.observations), accelerator)
        with _enough_runs():
            model = transfer.model_on(self.observations, choice.used)
        return FittedProfile(profile_name(self.observations, workload, self.args.data), model, choice)


def _predict(args: argparse.Namespace) -> None:
    """What the operator would write on the job once created: the controller's forecast (a resize only of a job
    held for it), as ``application.forecast`` answers it."""
    rayjob = read_rayjob(args.filename)
    if args.confidence is not None:  # as if the job's annotation said it
        confidence = str(_confidence(args.confidence))
        metadata = rayjob["metadata"] = rayjob.get("metadata") or {}
        metadata["annotations"] = {**(metadata.get("annotations") or {}), contract.CONFIDENCE: confidence}
    config = settings(advice_config)
    policy = config.policy({}).model_copy(update={"default_workload": args.workload or config.default_workload})
    source = _RunsFile(args) if args.data else ProfileStore(fits_when_asked=True)
    now = contract.now()
    held = RayJob(rayjob).hold is not None
    cluster = read_rayjob(args.cluster, "RayCluster") if args.cluster else None
    seen = application.forecast(rayjob, source, policy=policy, may_resize=held, now=now, cluster=cluster)
    if warning := seen.choice.warning(seen.profile):
        print(f"rayjob-advisor: warning: {warning}", file=sys.stderr)
    rows = seen.what_if()
    metadata = RayJob(rayjob).metadata
    written = seen.patch.get("metadata") or {}
    document: dict[str, Any] = {
        "rayjob": {"namespace": metadata.get("namespace", "default"), "name": metadata.get("name")},
        "features": seen.job.model_dump(mode="json"),
        "prediction": seen.prediction.model_dump(mode="json"),
        "what_if": [row.model_dump() for row in rows],
    }
    if seen.plan is not None:
        document["recommendation"] = json.loads(seen.plan.annotation())
    document |= {"annotations": written.get("annotations") or {}, "labels": written.get("labels") or {}}
    document["left_alone"] = seen.left_alone
    table = prediction_table(seen, rows)
    if args.accelerators:
        observations = (
            source.observations
            if isinstance(source, _RunsFile)
            else source.find(RayJob(rayjob).namespace, seen.inputs.workload or "").observations
        )
        with _enough_runs():
            compared, missing = prediction.compare_accelerators(
                rayjob, seen.inputs, seen.job, observations, args.accelerators, policy.prices, now,
                {seen.choice.used: seen.model},
            )  # fmt: skip
        document["accelerators"] = {"what_if": [row.model_dump() for row in compared], "missing": missing}
        table += "\n\n" + accelerator_table(compared, missing, measured_accelerators(observations))
    _emit(args, document, table)


def settings(load: Callable[[], OperatorConfig]) -> OperatorConfig:
    """The operator's settings ``load`` reads (the CLI's and the kubectl plugin's); bad ones are the user's to fix,
    in pydantic's words."""
    try:
        return load()
    except pydantic.ValidationError as exc:
        raise UsageError(f"bad settings: {contract.validation_problems(exc, 'settings')}") from None


if __name__ == "__main__":
    sys.exit(main())
