"""House rules that no linter checks: kopf handlers stay thin, the request path enters the application once, tests
share helpers through the test kit."""

from __future__ import annotations

import ast
import inspect
import pathlib
from types import ModuleType

import pytest

from rayjob_advisor.kube import handlers, webhook, wiring

APPLYING = {"predict": 12, "admit": 12}  # the handlers that only apply application.advise()
ANY_HANDLER = 20


def body_lines(module: ModuleType) -> dict[str, int]:
    """Lines of each top-level function's body in ``module``, its docstring left out."""
    tree = ast.parse(inspect.getsource(module))
    lengths = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            statements = node.body[1:] if ast.get_docstring(node) else node.body
            lengths[node.name] = node.end_lineno - statements[0].lineno + 1
    return lengths


@pytest.mark.parametrize("module", [handlers, webhook, wiring], ids=lambda m: m.__name__)
def test_handlers_are_thin(module):
    for name, lines in body_lines(module).items():
        assert lines <= APPLYING.get(name, ANY_HANDLER), f"{module.__name__}.{name} has {lines} lines"


def test_the_admission_and_create_handlers_call_advise_once_and_nothing_else_of_the_domain():
    for module, name in ((handlers, "_advice"), (webhook, "_advice_or_unchanged")):
        source = inspect.getsource(getattr(module, name))
        assert source.count("application.advise(") == 1
        assert "prediction." not in source and "planner." not in source and "features" not in source


def test_no_test_imports_another_test_module():
    """What tests share lives in the test kit (rayjob_advisor_testkit) or in conftest.py's fixtures."""
    folder = pathlib.Path(__file__).parent
    test_modules = {path.stem for path in folder.glob("test_*.py")}
    for path in sorted(folder.glob("*.py")):
        nodes = list(ast.walk(ast.parse(path.read_text())))
        imported = {alias.name for node in nodes if isinstance(node, ast.Import) for alias in node.names}
        imported |= {node.module for node in nodes if isinstance(node, ast.ImportFrom) and node.module}
        assert not imported & test_modules, f"{path.name} imports {sorted(imported & test_modules)}"
