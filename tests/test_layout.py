"""The layout stays readable: the package and the emulator each import their modules without a
circle (type-only imports included, since a reader follows those too) and neither imports the
other; the models (the dbt package dbt_accessgov/) write each shared rule once, in a documented macro."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("tap_accessgov", "emulator")
TRANSFORM = ROOT / "dbt_accessgov"  # the models' package (the dbt utilities run it in place)


def modules_of(package: str) -> list[Path]:
    """The package's modules, its subpackages' included (its own tests' are not)."""
    return sorted(
        path
        for path in (ROOT / package).rglob("*.py")
        if "tests" not in path.relative_to(ROOT / package).parts
    )


def module_name(path: Path) -> str:
    """``tap_accessgov/engine/stream.py`` -> ``tap_accessgov.engine.stream`` (a package's
    ``__init__.py`` is the package)."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(module: Path) -> set[str]:
    """What ``module`` imports, wherever the import statement is (TYPE_CHECKING included):
    each name imported from a package of this project as ``package.name`` (a module, or a
    name its ``__init__`` gathers), anything else by its top two levels."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(module.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] in PACKAGES:
                found.add(node.module)
                found |= {f"{node.module}.{alias.name}" for alias in node.names}
            else:
                found.add(".".join(node.module.split(".")[:2]))
        elif isinstance(node, ast.Import):
            found |= {".".join(alias.name.split(".")[:2]) for alias in node.names}
    return found


def graph_of(package: str) -> dict[str, set[str]]:
    """Module -> the modules of the same package it imports (a package's ``__init__`` gathers
    its public names and imports its modules, so it is a node only as what it defines: the
    top-level one is left out, a subpackage's is kept)."""
    paths = {
        module_name(path): path
        for path in modules_of(package)
        if path.relative_to(ROOT / package).as_posix() != "__init__.py"
    }
    return {module: imports_of(path) & set(paths) - {module} for module, path in paths.items()}


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_circle(package: str) -> None:
    graph = graph_of(package)
    assert len(graph) > 5
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        if module in path:
            cycle = [*path[path.index(module) :], module]
            raise AssertionError("import circle: " + " -> ".join(cycle))
        if module in done:
            return
        for imported in sorted(graph[module]):
            visit(imported, [*path, module])
        done.add(module)

    for module in sorted(graph):
        visit(module, [])


@pytest.mark.parametrize(("package", "other"), [PACKAGES, PACKAGES[::-1]])
def test_the_tap_and_the_emulator_do_not_import_each_other(package: str, other: str) -> None:
    """The emulator stands for the service: the tap must not lean on its code, nor it on the
    tap's (each would then agree with the other by construction)."""
    leaks = sorted(
        f"{path.relative_to(ROOT)} imports {name}"
        for path in (ROOT / package).rglob("*.py")
        if "tests" not in path.parts
        for name in imports_of(path)
        if name.split(".")[0] == other
    )
    assert leaks == []


def yml_files() -> list[Path]:
    """The dbt project's properties files (its models', sources' and macros')."""
    return sorted(
        path for folder in ("models", "macros") for path in (TRANSFORM / folder).rglob("*.yml")
    )


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

    files = yml_files()
    assert files
    found = [hit for path in files for hit in old_keys(yaml.safe_load(path.read_text()), path.name)]
    assert found == []


def sql_files() -> dict[str, str]:
    """Every model, macro and generic test of the models' package, by path within it."""
    return {
        path.relative_to(TRANSFORM).as_posix(): path.read_text()
        for folder in ("models", "macros", "tests")
        for path in sorted((TRANSFORM / folder).rglob("*.sql"))
    }


def test_the_dbt_project_writes_each_shared_rule_once() -> None:
    """The rules several models share live in one macro each, so a change to one (a new
    unset value, another catalog name) is made once: an empty string (or an enum's zero
    value) is an unset field; names come from the catalog next to the ids; a full-table
    stream's current rows are the latest copies of its latest complete snapshot."""
    rules = {
        "unset field": (r"nullif\(|not in \(''", "macros/unset_fields.sql"),
        "catalog names": (r"ref\('stg_app(s|_entitlements)'\)", "macros/catalog_names.sql"),
        "latest copy": (r"row_number\(\)[^;]*?updatedAt", "macros/snapshots.sql"),
    }
    files = sql_files()
    assert len(files) > 10
    for rule, (pattern, home) in rules.items():
        found = sorted(path for path, text in files.items() if re.search(pattern, text))
        assert found == [home], f"{rule}: written in {found}, not only in {home}"


def test_every_dbt_macro_is_documented() -> None:
    """dbt shows a macro's description and arguments (dbt docs) only when a properties file
    gives them: every macro and generic test, with each of its arguments."""
    import yaml

    defined = {
        ("test_" if kind == "test" else "") + name: {
            arg.split("=")[0].strip() for arg in args.split(",") if arg.strip()
        }
        for text in sql_files().values()
        for kind, name, args in re.findall(r"{%-?\s*(macro|test)\s+(\w+)\(([^)]*)\)", text)
    }
    documented = {
        entry["name"]: entry
        for path in sorted((TRANSFORM / "macros").glob("*.yml"))
        for entry in yaml.safe_load(path.read_text()).get("macros", [])
    }
    assert len(defined) > 5
    assert sorted(defined) == sorted(documented)
    for name, args in defined.items():
        entry = documented[name]
        assert entry.get("description", "").strip(), name
        assert {arg["name"] for arg in entry.get("arguments", [])} == args, name
        assert all(arg.get("description") for arg in entry["arguments"]), name


def test_the_dbt_project_writes_each_long_description_once() -> None:
    """A column description longer than a short phrase, shared by several models, is a docs
    block (models/docs.md) that each refers to, so its wording changes in one place."""
    import yaml

    def descriptions(node: object) -> list[str]:
        if isinstance(node, dict):
            found = [node["description"]] if isinstance(node.get("description"), str) else []
            return found + [text for value in node.values() for text in descriptions(value)]
        if isinstance(node, list):
            return [text for item in node for text in descriptions(item)]
        return []

    texts = [
        " ".join(text.split())
        for path in yml_files()
        for text in descriptions(yaml.safe_load(path.read_text()))
    ]
    assert len(texts) > 50
    repeated = {text for text in texts if len(text) >= 60 and texts.count(text) > 1}
    assert repeated == set()


def test_the_sdk_is_not_pinned_below_its_next_release() -> None:
    """The package uses no SDK private, so nothing holds it below the next singer-sdk: the
    requirement has a lower bound only (the lock file says which release is tested)."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    sdk = [req for req in project["dependencies"] if req.startswith("singer-sdk")]
    assert sdk == ["singer-sdk[msgspec]>=0.54.2"]


# What of tests.conftest runs the tap (the rest is emulators, datasets and the warehouse).
RUNS_THE_TAP = {"sync", "run_cli", "catalog_selecting", "TapAccessGov", "BIN_TAP"}


def test_what_the_next_sdks_run_leaves_out_never_uses_the_sdk() -> None:
    """CI's run against the next singer-sdk (tasks.py) skips the emulator's tests and the test
    files it names: none may import the SDK or the tap, or run the tap through the tests'
    helpers, or the next release could break what that run did not try."""
    import tasks

    ignored = [ROOT / arg.split("=", 1)[1] for arg in tasks.WITH_THE_SDK if "=" in arg]
    assert tasks.WITH_THE_SDK[0] == "tests"  # not emulator/tests
    assert ignored
    emulator = [*modules_of("emulator"), *(ROOT / "emulator" / "tests").glob("*.py")]
    for path in [*ignored, *emulator]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                names = {node.module or ""} | (
                    {alias.name for alias in node.names} & RUNS_THE_TAP
                    if node.module == "tests.conftest"
                    else set()
                )
            else:
                continue
            used = {n for n in names if n.split(".")[0] in ("tap_accessgov", "singer_sdk")}
            assert not used | (names & RUNS_THE_TAP), (path.name, sorted(names))


def test_the_layout_maps_name_every_module_there_is() -> None:
    """The map of the package (docs/development.md, *The layout*) and the emulator's README
    table name each module once, and no module that is gone: a reader finds each concern where
    the map says."""
    layout = (ROOT / "docs" / "development.md").read_text()
    block = layout[layout.index("tap_accessgov/   one module per concern:") :]
    block = block[: block.index("\nemulator/")]
    folders = re.split(r"\n  (\w+)/ ", block)  # the top-level modules, then each folder's
    mapped = {
        "tap_accessgov": re.findall(r"^  (\w+\.py) ", folders[0], flags=re.M)
        + [
            f"{folder}/{name}"
            for folder, listed in zip(folders[1::2], folders[2::2], strict=True)
            for name in re.findall(r"^    (\w+\.py) ", listed, flags=re.M)
        ],
        "emulator": re.findall(
            r"^\| `(\w+\.py)` \|", (ROOT / "emulator" / "README.md").read_text(), flags=re.M
        ),
    }
    for package, names in mapped.items():
        modules = sorted(
            path.relative_to(ROOT / package).as_posix()
            for path in modules_of(package)
            if (path.name == "__init__.py" and path.parent != ROOT / package)
            or not path.name.startswith("__")
        )
        assert sorted(names) == modules, package
