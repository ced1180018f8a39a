"""The package's layout stays readable: its modules import each other without a circle
(type-only imports included, since a reader follows those too)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "tap_accessgov"


def imports_of(module: Path) -> set[str]:
    """The tap_accessgov modules that ``module`` imports, wherever the import statement is."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(module.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "tap_accessgov":
                found |= {alias.name for alias in node.names}
            elif node.module.startswith("tap_accessgov."):
                found.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            found |= {
                alias.name.split(".")[1]
                for alias in node.names
                if alias.name.startswith("tap_accessgov.")
            }
    return found


def test_the_package_has_no_import_circle() -> None:
    graph = {path.stem: imports_of(path) for path in PACKAGE.glob("*.py")}
    assert len(graph) > 5
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        if module in path:
            cycle = [*path[path.index(module) :], module]
            raise AssertionError("import circle: " + " -> ".join(cycle))
        if module in done:
            return
        for imported in sorted(graph.get(module, ())):
            visit(imported, [*path, module])
        done.add(module)

    for module in sorted(graph):
        visit(module, [])


def test_the_dbt_project_uses_the_current_data_tests_key() -> None:
    """dbt 1.8 renamed a model's and a column's ``tests:`` to ``data_tests:`` and deprecates
    the old key: one spelling throughout, the current one."""
    import yaml

    def old_keys(node: object, where: str) -> list[str]:
        if isinstance(node, dict):
            found = [f"{where}.tests"] if "tests" in node else []
            for key, value in node.items():
                found += old_keys(value, f"{where}.{key}")
            return found
        if isinstance(node, list):
            return [hit for i, item in enumerate(node) for hit in old_keys(item, f"{where}[{i}]")]
        return []

    files = sorted((PACKAGE.parent / "transform" / "models").rglob("*.yml"))
    assert files
    found = [hit for path in files for hit in old_keys(yaml.safe_load(path.read_text()), path.name)]
    assert found == []


def test_the_sdk_is_not_pinned_below_its_next_release() -> None:
    """The package uses no SDK private, so nothing holds it below the next singer-sdk: the
    requirement has a lower bound only (the lock file says which release is tested)."""
    import tomllib

    project = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())["project"]
    sdk = [req for req in project["dependencies"] if req.startswith("singer-sdk")]
    assert sdk == ["singer-sdk[msgspec]>=0.54.2"]
