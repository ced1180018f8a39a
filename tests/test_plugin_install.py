"""How `meltano install` lays out the plugins meltano.yml ships: compiled, so that no run pays
for compiling them.

Meltano installs plugins with uv, which leaves their modules as source unless told otherwise;
where PYTHONDONTWRITEBYTECODE is set (this project's machines, many container images) Python
then recompiles singer-sdk, SQLAlchemy and the rest on every start of the tap and the target:
about 3 s of CPU on every `meltano run` (docs/performance.md). meltano.yml's project `env`
tells uv to compile at install time. The test installs a one-module plugin with that `env` in
a scratch Meltano project (meltano.yml's own plugins would take minutes) and looks for the
bytecode, with PYTHONDONTWRITEBYTECODE set so nothing but the installer can have written it."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import tasks
from tests.conftest import ROOT

BIN = Path(sys.executable).parent


@pytest.mark.e2e
def test_meltano_install_compiles_the_plugins_modules(tmp_path: Path) -> None:
    package = tmp_path / "probe"
    (package / "accessgov_probe").mkdir(parents=True)
    (package / "accessgov_probe" / "__init__.py").write_text('"""A module to compile."""\n')
    (package / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "accessgov-probe"\nversion = "0.1.0"\n'
    )
    shipped = yaml.safe_load((ROOT / "meltano.yml").read_text())
    project = tmp_path / "project"
    project.mkdir()
    (project / "meltano.yml").write_text(
        yaml.safe_dump(
            {
                "project_id": "accessgov-probe",
                "send_anonymous_usage_stats": False,
                "env": shipped.get("env", {}),
                "plugins": {
                    "utilities": [{"name": "probe", "namespace": "probe", "pip_url": str(package)}]
                },
            }
        )
    )
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("UV_", "MELTANO_"))  # only meltano.yml may ask uv to compile
    }
    env.update(PYTHONDONTWRITEBYTECODE="1", MELTANO_SEND_ANONYMOUS_USAGE_STATS="false")
    subprocess.run(
        [str(BIN / "meltano"), "install"], cwd=project, env=env, check=True, capture_output=True
    )

    site_packages = list(
        (project / ".meltano" / "utilities" / "probe" / "venv").glob("lib/python3*/site-packages")
    )
    assert len(site_packages) == 1, site_packages
    module = site_packages[0] / "accessgov_probe" / "__init__.py"
    assert module.exists()
    bytecode = Path(importlib.util.cache_from_source(str(module)))
    assert bytecode.exists(), f"meltano install left {module} uncompiled (meltano.yml env)"


def test_the_project_environment_is_installed_compiled() -> None:
    """The same for the environments ``python3 tasks.py`` makes: .venv (its bootstrap), which
    runs Meltano itself, the tap of the benchmarks and these tests, and CI's .venv-sdk-next,
    which runs these tests again against the next singer-sdk: every command started from one
    would otherwise compile Meltano, singer-sdk & co. again (~1.5 s of CPU per `meltano run`,
    ~0.8 s per start of the tap). Looked for on modules imported at first use by each,
    installed by the lock."""
    if Path(sys.prefix).resolve() not in {tasks.VENV.resolve(), tasks.SDK_NEXT_VENV.resolve()}:
        pytest.skip("not run from an environment tasks.py makes")
    for name in ("meltano.cli", "singer_sdk.streams.core", "sqlalchemy.orm.session"):
        spec = importlib.util.find_spec(name)
        assert spec is not None
        assert spec.origin is not None
        bytecode = Path(importlib.util.cache_from_source(spec.origin))
        assert bytecode.exists(), f"{spec.origin} is not compiled (tasks.py, compile_installed)"
