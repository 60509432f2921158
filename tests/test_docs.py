"""Every command of the README and the documentation site is run here, or checked where it needs a cluster.

Commands are the lines of ```sh blocks (a ``\\`` ends a continued line; ``&&`` and ``|`` separate steps).

Run: what can run on this machine with no cluster, ``rayjob-advisor`` (but ``run``, and the profiling sweeps of
minutes outside the tutorial, whose options are parsed), ``sed``, ``hack/try-operator.py``. A command runs in a
scratch folder that sees the checkout's ``examples/``, ``operator/`` and ``.venv/``, and must exit 0, or 2 where
the page shows a ``rayjob-advisor: error:`` line. A ```text block right after a block is the output of its last
command: its labels and headings must appear in the real output (numbers may differ).

Checked: what needs a cluster, Docker or a network. ``kubectl``: the files it names exist, the annotation keys
are the contract's, the Event reasons are ``reasons``'s, the objects are the examples'. ``helm install`` and
``upgrade`` of the chart: rendered with the same ``--set`` values by the test kit, as ``helm template`` would.
``helm test``: the chart has a test hook. ``docker``: the Dockerfile. ``hack/*.sh``: ShellCheck (in
``test_readme.py``), and a sweep's options parse. The set-up and test commands: CI runs them (``.ci/run``).
``python -m benchmarks.X``: the module's ``--help`` accepts the flags (the benchmarks take minutes).

A step no rule knows fails the test, so every new command is run or checked.
"""

from __future__ import annotations

import ast
import dataclasses
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator

import pytest
import yaml

from rayjob_advisor import key_docs, reasons
from rayjob_advisor.cli import verbs
from rayjob_advisor_testkit.chart import by_kind, render
from rayjob_advisor_testkit.paths import CHART, KUBERAY_CRDS, REPO

DOCS = REPO / "docs"
PAGES = sorted([REPO / "README.md", *DOCS.rglob("*.md")])
CI = (REPO / ".ci" / "run").read_text() + (REPO / ".ci" / "lint").read_text()
RUNNABLE = {"rayjob-advisor", "sed"}
KEY = re.compile(r"rayjob-advisor\\?\.io/[-a-z]+")


@dataclasses.dataclass
class Command:
    """One command of a page: its steps, and the output the page shows for it (if any)."""

    page: pathlib.Path
    text: str
    output: str | None = None

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(REPO)}: {self.text[:70]}"

    def steps(self) -> list[list[str]]:
        """The command's steps, each as words (``&&`` and ``|`` split it; comments and ``VAR=value`` dropped)."""
        found = []
        for part in re.split(r"\s&&\s|\s\|\s", self.text):
            words = shlex.split(part, comments=True)
            while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):
                words.pop(0)
            if words:
                found.append(words)
        return found


def commands(page: pathlib.Path) -> Iterator[Command]:
    """The commands of ```sh blocks; a ```text block right after one (at most a sentence between) is the output of
    its last command."""
    blocks = list(re.finditer(r"^```(\w*)\n(.*?)^```\s*$", page.read_text(), flags=re.MULTILINE | re.DOTALL))
    for index, block in enumerate(blocks):
        if block.group(1) != "sh":
            continue
        lines = block.group(2).replace("\\\n", " ").splitlines()
        found = [Command(page, line.strip()) for line in lines if line.strip() and not line.lstrip().startswith("#")]
        following = blocks[index + 1] if index + 1 < len(blocks) else None
        adjacent = following is not None and not page.read_text()[block.end() : following.start()].strip(" \n:")
        if found and following is not None and following.group(1) == "text":
            text_before = page.read_text()[block.end() : following.start()]
            if adjacent or len(text_before) < 200:
                found[-1].output = following.group(2)
        yield from found


ALL = [command for page in PAGES for command in commands(page)]


def program(words: list[str]) -> str:
    return pathlib.PurePath(words[0]).name


def runnable(command: Command) -> bool:
    first = command.steps()[0]
    if first[:2] == [".venv/bin/python", "hack/try-operator.py"]:
        return True
    if program(first) not in RUNNABLE or first[1:2] == ["run"]:
        return False
    return program(first) != "rayjob-advisor" or not is_sweep(first)


def is_sweep(words: list[str]) -> bool:
    return words[1:2] == ["profile"] and "--emit-profile" not in words


def test_the_pages_have_commands():
    assert len(ALL) > 40 and sum(map(runnable, ALL)) > 10


# What is run.


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """A folder that sees the checkout's examples, package and venv, where commands may write; ``runs.csv`` is a
    stand-in for a sweep's output (the shipped CPU profile's runs, named ``my-model``)."""
    folder = tmp_path_factory.mktemp("docs-commands")
    for name in ("examples", "operator", ".venv", "hack", "charts", "crds"):
        (folder / name).symlink_to(REPO / name)
    shipped = (REPO / "operator" / "rayjob_advisor" / "profiles" / "data" / "digits-cnn.csv").read_text()
    (folder / "runs.csv").write_text(shipped.replace("digits-cnn,", "my-model,"))
    return folder


def environment() -> dict[str, str]:
    kept = {key: value for key, value in os.environ.items() if not key.startswith("RAYJOB_ADVISOR_")}
    return kept | {"PATH": f"{pathlib.Path(sys.executable).parent}:{kept.get('PATH', '')}", "COLUMNS": "120"}


def run_command(command: Command, folder: pathlib.Path) -> None:
    first = command.steps()[0]
    if first[:2] == [".venv/bin/python", "hack/try-operator.py"]:
        return try_operator(folder)
    shell_text = command.text.split(" | ")[0]  # a pipe into kubectl: the first step is what runs here
    expected = 2 if command.output and command.output.startswith("rayjob-advisor: error:") else 0
    done = subprocess.run(
        ["bash", "-c", shell_text], cwd=folder, env=environment(), capture_output=True, text=True, timeout=300
    )
    printed = done.stdout + done.stderr
    assert done.returncode == expected, f"{command.text}\n{printed[-3000:]}"
    if command.output:
        assert_shows(command.output, printed)


def assert_shows(shown: str, printed: str) -> None:
    """Every label (``profile:``) and every heading line of ``shown`` is in ``printed``; numbers may differ."""
    real = [" ".join(line.split()) for line in printed.splitlines()]
    for line in shown.splitlines():
        text = " ".join(line.split())
        if not text or not re.search(r"[a-z]{3}", text) or "..." in text:
            continue
        label = re.match(r"^([a-z][-a-z ]*[a-z]): ", text)
        if label:
            assert any(r.startswith(label.group(1) + ":") for r in real), f"no line {label.group(1)!r}: in\n{printed}"
        elif re.search(r"\d", text) and not text.endswith(":"):
            assert any(re.sub(r"[\d.]+", "#", text) == re.sub(r"[\d.]+", "#", r) for r in real), text
        else:
            assert text in real, f"{text!r} not in\n{printed}"


def try_operator(folder: pathlib.Path) -> None:
    """``hack/try-operator.py`` starts the emulator and the operator and prints the KUBECONFIG to use."""
    process = subprocess.Popen(
        [sys.executable, str(REPO / "hack" / "try-operator.py")],
        cwd=folder,
        env=environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert process.stdout is not None
        lines = []
        for line in process.stdout:
            lines.append(line)
            if "export KUBECONFIG=" in line:
                kubeconfig = pathlib.Path(line.split("=", 1)[1].strip())
                assert yaml.safe_load(kubeconfig.read_text())["current-context"] == "emulator"
                return
        raise AssertionError("".join(lines))
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.mark.parametrize("command", [c for c in ALL if runnable(c)], ids=lambda c: c.id)
def test_the_command_runs(command: Command, scratch: pathlib.Path):
    run_command(command, scratch)


SWEEPS = [
    c
    for c in ALL
    if program(c.steps()[0]) == "rayjob-advisor"
    and is_sweep(c.steps()[0])
    and c.page.parent.name == "tutorials"
    and "--plan" not in c.steps()[0]  # a plan's runs take minutes: it parses; tests/test_profiling runs one for real
]


@pytest.mark.ray
@pytest.mark.parametrize("command", SWEEPS, ids=lambda c: c.id)
def test_the_local_profiling_sweep_runs(command: Command, scratch: pathlib.Path):
    """A real Ray Train run of the tutorial's own training function (about a minute)."""
    run_command(command, scratch)
    out = command.steps()[0][command.steps()[0].index("--out") + 1]
    rows = [line for line in (scratch / out).read_text().splitlines() if not line.startswith("#")]
    assert len(rows) == 2 and rows[1].startswith("my-model,")


# What is checked.


def repository_paths(words: list[str]) -> list[pathlib.Path]:
    """The checkout's files a command names (``-f FILE``, ``--from-file=KEY=FILE``, ``charts/...``)."""
    found = []
    for word in words:
        value = word.split("=")[-1]
        if re.match(r"(examples|operator|charts|crds|hack)/", value):
            found.append(REPO / value)
    return found


def check_kubectl(words: list[str]) -> None:
    """The files exist; keys are the contract's; Event reasons are ``reasons``'s; examples' names are real."""
    assert words[1] in {"apply", "create", "label", "get", "annotate", "rayjob-advisor", "plugin", "delete"}, words
    for path in repository_paths(words):
        assert path.exists(), path
    keys = {key.replace("\\", "") for word in words for key in KEY.findall(word)}
    documented = {doc.key for docs in key_docs.KEY_DOCS.values() for doc in docs}
    assert keys <= documented, keys - documented
    for word in words:
        if word.startswith("reason="):
            assert word.removeprefix("reason=") in {doc.reason for doc in reasons.REASON_DOCS}, word
    named = {
        yaml.safe_load_all(path.read_text()).__next__()["metadata"]["name"]
        for path in (REPO / "examples").glob("*.yaml")
    }
    if words[1:3] in (["get", "rayjob"], ["rayjob-advisor", "describe"]):
        assert words[3] in named, words[3]
    if words[1:3] == ["create", "configmap"]:
        mounted = {
            volume["configMap"]["name"]
            for path in (REPO / "examples").glob("*.yaml")
            for document in yaml.safe_load_all(path.read_text())
            for volume in document["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"].get("volumes", [])
        }
        assert words[3] in mounted, words[3]


def set_values(words: list[str]) -> dict:
    """The values of ``--set A.B=C`` flags, as Helm reads them (``{a,b}`` lists, numbers and booleans typed)."""
    values: dict = {}
    for index, word in enumerate(words):
        if word != "--set":
            continue
        path, _, text = words[index + 1].partition("=")
        value: object = yaml.safe_load(text) if not text.startswith("{") else text.strip("{}").split(",")
        node = values
        *parents, leaf = path.split(".")
        for parent in parents:
            node = node.setdefault(parent, {})
        node[leaf] = value
    return values


def merged(base: dict, extra: dict) -> dict:
    result = dict(base)
    for key, value in extra.items():
        result[key] = merged(result.get(key, {}), value) if isinstance(value, dict) else value
    return result


def check_helm(words: list[str]) -> None:
    """The chart renders with the command's values; the kinds the pages promise are there."""
    if words[1] == "repo":
        assert words[2:] == ["add", "kuberay", "https://ray-project.github.io/kuberay-helm/"], words
        assert " ".join(words) in (REPO / "hack" / "e2e-kind.sh").read_text()
        return
    if words[1] == "test":
        assert list((CHART / "templates" / "tests").glob("*.yaml"))
        return
    if words[1] == "uninstall":
        return
    assert words[1] in {"install", "upgrade"}, words
    if words[3] == "kuberay/kuberay-operator":
        return
    assert words[3] == "charts/rayjob-advisor", words
    values = set_values(words)
    if words[1] == "upgrade":  # --reuse-values: over an install's values
        values = merged({"image": {"repository": "registry.example.com/rayjob-advisor"}}, values)
    objects = render(values)
    kinds = {o["kind"] for o in objects}
    assert {"Deployment", "MutatingWebhookConfiguration", "ConfigMap"} <= kinds
    if values.get("metrics", {}).get("serviceMonitor", {}).get("enabled"):
        assert by_kind(objects, "ServiceMonitor")
    if values.get("metrics", {}).get("prometheusRule", {}).get("enabled"):
        (rule,) = by_kind(objects, "PrometheusRule")
        assert rule["metadata"]["labels"]["release"] == values["metrics"]["prometheusRule"]["labels"]["release"]


def check_benchmark(words: list[str]) -> None:
    """The module exists, and its ``--help`` names every flag the page gives it."""
    module = words[words.index("-m") + 1]
    done = subprocess.run(
        [sys.executable, "-m", module, "--help"], cwd=REPO, env=environment(), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    for flag in [w for w in words if w.startswith("--")]:
        assert flag in done.stdout, f"{module} has no {flag}"


def check(command: Command) -> None:
    """A command that cannot run here, checked for consistency with the repository."""
    if all(part.strip() in CI for part in command.text.split("&&")):
        return  # the set-up or test command: CI runs it
    for words in command.steps():
        name = program(words)
        if words[0] == "kubectl":
            check_kubectl(words)
        elif words[0] == "helm":
            check_helm(words)
        elif words[0] in {"docker", "kind"}:
            assert (REPO / "Dockerfile").exists() and words[1] in {"build", "push", "load"}
        elif words[0] in {"hack/e2e-kind.sh", "hack/profile-on-kuberay.sh"}:
            assert os.access(REPO / words[0], os.X_OK)
            if name == "profile-on-kuberay.sh":  # its options are a sweep's: they must parse
                verbs._parser().parse_args(["profile", *words[2:]])
        elif words[0] == "export":
            assert words[1] == "PATH=$PWD/.venv/bin:$PATH"
        elif words[:3] == ["python3", "-m", "venv"]:
            assert words[3] == ".venv"
        elif words[:2] == [".venv/bin/pip", "install"]:  # the CPU build of the pinned PyTorch
            assert f'"{words[2]}"' in (REPO / "pyproject.toml").read_text(), words
        elif words[0] == ".venv/bin/pytest":
            assert (REPO / words[1]).exists()
        elif words[0].endswith("python") and "-m" in words and words[words.index("-m") + 1].startswith("benchmarks"):
            check_benchmark(words)
        elif words[0] == ".venv/bin/python" and words[1] in {"hack/gen-reference.py", "hack/vendor-kuberay.py"}:
            assert (REPO / words[1]).exists()
        elif words[0] == ".venv/bin/mkdocs":
            assert words[1] == "serve" and (REPO / "mkdocs.yml").exists()
        elif name == "rayjob-advisor" and is_sweep(words):  # a sweep of minutes, outside the tutorial: it parses
            verbs._parser().parse_args(words[1:])
        elif name == "rayjob-advisor":  # the first step ran; this is a later one
            continue
        else:
            raise AssertionError(f"no rule runs or checks {words}: add one to tests/test_docs.py")


@pytest.mark.parametrize("command", [c for c in ALL if not runnable(c) and c not in SWEEPS], ids=lambda c: c.id)
def test_the_command_is_consistent_with_the_repository(command: Command):
    check(command)


def test_a_pipe_into_kubectl_is_checked_too():
    piped = [c for c in ALL if runnable(c) and len(c.steps()) > 1]
    assert piped
    for command in piped:
        for words in command.steps()[1:]:
            check_kubectl(words)


# Troubleshooting covers every message the code gives a user.

USER_ERRORS = {
    "AnnotationError", "UnpredictableJob", "UnknownWorkload", "BadProfile", "UsageError", "NoCluster",
    "BadReview", "Rejected", "NotRefinable", "ProfileConflict", "ArgumentTypeError", "BadPlan",
}  # fmt: skip
VALIDATORS = {"contract.py", "config.py", "plan.py"}  # their ValueErrors are pydantic validators': users read them


def messages() -> Iterator[tuple[str, str]]:
    """(where, the longest constant part) of each message a user error is raised with."""
    package = REPO / "operator" / "rayjob_advisor"
    for path in sorted(package.rglob("*.py")):
        if path.parent.name in {"models", "profiling"}:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args):
                continue
            function = node.exc.func
            name = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", "")
            if name not in USER_ERRORS and not (name == "ValueError" and path.name in VALIDATORS):
                continue
            argument = node.exc.args[-1] if name == "Rejected" else node.exc.args[0]
            parts = [argument.value] if isinstance(argument, ast.Constant) else []
            if isinstance(argument, ast.JoinedStr):
                parts = [v.value for v in argument.values if isinstance(v, ast.Constant)]
            longest = max((str(p).strip(" :;,.'\"(") for p in parts), key=len, default="")
            if len(longest) >= 10:
                yield f"{path.relative_to(package)}:{node.lineno}", longest


def test_every_user_error_message_is_on_the_troubleshooting_page():
    page = " ".join((DOCS / "troubleshooting.md").read_text().replace("`", "").split())
    found = list(messages())
    assert len(found) > 50
    missing = [f"{where}: {text!r}" for where, text in found if " ".join(text.replace("`", "").split()) not in page]
    assert not missing, "messages missing from docs/troubleshooting.md:\n" + "\n".join(missing)


def test_the_supported_versions_are_the_chart_s_and_the_tested_kuberay_s():
    page = (DOCS / "compatibility.md").read_text()
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert f'`kubeVersion: "{chart["kubeVersion"]}"`' in page
    source = KUBERAY_CRDS.parent / "SOURCE.md"  # the provenance of the CRDs the tests validate against
    if source.exists():
        commit = re.search(r"Commit: ([0-9a-f]{7})", source.read_text())
        assert commit and f"`{commit.group(1)}`" in page


def test_no_page_names_a_path_of_this_machine():
    for page in PAGES:
        assert not re.search(r"/(work|home|root|tmp)/[\w.-]+/", page.read_text()), page


def test_the_scratch_folder_is_not_the_checkout(scratch: pathlib.Path):
    assert not (REPO / "try-runs.csv").exists() and not (REPO / "no-size.yaml").exists()
    assert shutil.which("bash")
