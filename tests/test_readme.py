"""The README is a front door that stays true: short, every command in it run as written by a
test that reads it from the README (tests/readme.py), every link to a file of the repository
pointing at one that exists."""

from __future__ import annotations

import re

from tests.readme import ROOT, readme_blocks

README = ROOT / "README.md"


def test_every_readme_command_is_run_as_written_by_a_test() -> None:
    """Each bash block names its runner, a test that exists and reads the block from the README
    by that name (or .ci/run, which holds the test command); no block is left unmarked."""
    sources = {path: path.read_text() for path in (ROOT / "tests").glob("*.py")}
    bash = [block for block in readme_blocks() if block.language == "bash"]
    assert len(bash) >= 6
    for block in bash:
        assert block.runner, f"a bash block no test runs:\n{block.body}"
        if block.runner == ".ci/run":
            ci = (ROOT / ".ci" / "run").read_text().splitlines()
            assert all(line in ci for line in block.body.splitlines()), block.body
            continue
        file, test = block.runner.split("::")
        assert re.search(rf"^def {test}\(", (ROOT / file).read_text(), re.M), block.runner
        readers = [
            path.name
            for path, text in sources.items()
            if f'"{block.runner}"' in text.replace('"\n    "', "")
            and re.search(r"\breadme_(commands|script|yaml)\(", text)
        ]
        assert readers, f"no test reads the block of {block.runner} from the README"


def test_the_readme_is_a_front_door() -> None:
    """About 150 lines: what it is and for whom, trying it, using it, links; the details live
    in docs/. Its first screen says what it is and offers the three commands to try it."""
    lines = README.read_text().splitlines()
    assert len(lines) <= 180
    first_screen = "\n".join(lines[:40])
    assert "python3 tasks.py demo" in first_screen
    assert "## Try it" in first_screen


def test_the_readme_links_to_files_that_exist() -> None:
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README.read_text()):
        if not target.startswith("http"):
            assert (ROOT / target).exists(), target
