"""What the suite relies on from pytest-xdist holds with the locked pytest: ``--dist
loadgroup`` (pyproject's addopts) runs the tests of one ``xdist_group`` on one worker, so a
costly module fixture (the package compiled once: test_portability.py; the release built
once: test_release.py) is made once, not once per worker. pytest 9.2 broke it silently
(pytest-dev/pytest-xdist#1386): every group was spread over the workers, and each worker
compiled and built again."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

GROUPED = """
import os
import pytest

pytestmark = pytest.mark.xdist_group("one")


@pytest.mark.parametrize("n", range(8))
def test_where(n, tmp_path_factory):
    (tmp_path_factory.getbasetemp().parent / f"ran-{n}").write_text(
        os.environ["PYTEST_XDIST_WORKER"]
    )
"""


def test_the_tests_of_an_xdist_group_run_on_one_worker(tmp_path: Path) -> None:
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # none of the project's own options
    basetemp = tmp_path / "base"
    pytest = (sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-q")
    result = subprocess.run(
        [*pytest, "-p", "no:cacheprovider", f"--basetemp={basetemp}", "test_grouped.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    workers = {path.read_text() for path in basetemp.glob("ran-*")}
    assert len(list(basetemp.glob("ran-*"))) == 8
    assert len(workers) == 1, f"the group ran on {sorted(workers)}"
