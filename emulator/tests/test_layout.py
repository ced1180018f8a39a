"""The emulator's layout by concern: each concern stands alone, the HTTP front talks to the
rest through what it is handed, and error codes have names (tests/test_layout.py checks that
its imports, like the package's, have no circle and that neither imports the other)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent


def _modules() -> dict[str, ast.Module]:
    return {path.stem: ast.parse(path.read_text()) for path in sorted(PACKAGE.glob("*.py"))}


def imports_of(tree: ast.Module) -> set[str]:
    """The emulator modules a module imports, wherever the import statement is (under
    ``if TYPE_CHECKING:`` too); ``from emulator import X`` names module X if there is one,
    else the package's ``__init__``."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "emulator":
                for alias in node.names:
                    is_module = (PACKAGE / f"{alias.name}.py").exists()
                    found.add(alias.name if is_module else "__init__")
            elif node.module.startswith("emulator."):
                found.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "emulator":
                    found.add("__init__")
                elif alias.name.startswith("emulator."):
                    found.add(alias.name.split(".")[1])
    return found


def test_each_concern_holds_its_data_without_the_whole_tenant() -> None:
    """catalog, users, exclusions, lifecycles, the feed, accounts, the directory, the
    grants held now, reviews, tasks, the system log, resources, attributes, owners, the
    service's roles and connectors each keep their data and their
    endpoint's answers; none reaches for the Dataset that composes them, nor for the service
    or the front above them (so each can be read, and tested, alone)."""
    graph = {name: imports_of(tree) for name, tree in _modules().items()}

    def reached(module: str) -> set[str]:
        seen: set[str] = set()
        todo = [module]
        while todo:
            for imported in graph[todo.pop()] - seen:
                seen.add(imported)
                todo.append(imported)
        return seen

    above = {"__init__", "dataset", "service", "server", "control"}
    concerns = {
        "catalog": "Catalog",
        "users": "Users",
        "exclusions": "Exclusions",
        "lifecycle": "LifecyclePlan",
        "feed": "GrantFeed",
        "accounts": "Accounts",
        "directory": "Directory",
        "grants": "CurrentGrants",
        "reviews": "AccessReviews",
        "tasks": "Tasks",
        "system_log": "SystemLog",
        "resources": "Resources",
        "attributes": "Attributes",
        "owners": "Owners",
        "iam": "IamRoles",
        "connectors": "Connectors",
    }
    for module, holder in concerns.items():
        assert reached(module).isdisjoint(above), module
        classes = {n.name for n in _modules()[module].body if isinstance(n, ast.ClassDef)}
        assert holder in classes, module


def test_the_http_front_reaches_the_emulator_only_through_what_it_is_handed() -> None:
    """server.py imports no module that holds data, and its request handler reads nothing of
    its server but the backend, the controls and the open connections."""
    server = _modules()["server"]
    assert imports_of(server) <= {"errors", "faults"}
    handler = next(
        node for node in server.body if isinstance(node, ast.ClassDef) and node.name == "_Handler"
    )
    reached = {
        node.attr
        for node in ast.walk(handler)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == "server"
        and isinstance(node.value.value, ast.Name)
        and node.value.value.id == "self"
    }
    assert reached <= {"backend", "control", "connections", "connections_lock"}


def test_error_codes_are_named_in_errors_py() -> None:
    """No module but errors.py writes a status code as a bare number or builds an error body
    by hand: every answer's ``code`` is one errors.py names."""
    offenders = []
    for name, tree in _modules().items():
        if name == "errors":
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "ApiError":
                code = node.args[1] if len(node.args) > 1 else None
                code = next((k.value for k in node.keywords if k.arg == "code"), code)
                if isinstance(code, ast.Constant):
                    offenders.append(f"{name}.py:{node.lineno}: ApiError(..., {code.value}, ...)")
            if isinstance(node, ast.Dict) and any(
                isinstance(key, ast.Constant) and key.value == "code" for key in node.keys
            ):
                offenders.append(f"{name}.py:{node.lineno}: an error body built by hand")
    assert offenders == []
