"""docs/architecture.md, the page a newcomer starts from, names every module of the package and its layer."""

from __future__ import annotations

import re
import tomllib

from rayjob_advisor_testkit.paths import REPO

PACKAGE = REPO / "operator" / "rayjob_advisor"
PAGE = (REPO / "docs" / "architecture.md").read_text()


def test_every_module_of_the_package_is_on_the_architecture_page():
    modules = sorted(str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py") if path.name != "__init__.py")
    assert len(modules) > 50
    missing = [module for module in modules if f"`{module}`" not in PAGE]
    assert not missing, f"modules missing from docs/architecture.md: {missing}"


def test_the_page_names_the_layers_the_import_contract_checks_in_its_order():
    contracts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (layers,) = [contract["layers"] for contract in contracts if contract["type"] == "layers"]
    names = [name.strip() for layer in layers for name in layer.split("|")]
    shown = [
        match.group(1).removesuffix("/").removesuffix(".py")
        for match in re.finditer(r"\*\*`?([a-z_]+(?:/|\.py))`?\*\*", PAGE)
    ]
    assert len(shown) >= 8 and [name for name in shown if name in names] == [name for name in names if name in shown]
    assert PAGE.startswith("# Architecture") and "Read `operator/rayjob_advisor/application.py` first" in PAGE
