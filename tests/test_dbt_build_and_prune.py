"""scripts/dbt_build_and_prune.py: the dbt utilities' ``build-and-prune`` command parses once,
builds, and prunes only after a build that succeeded, with dbt's exit status. dbt itself is a
stand-in here (``FakeDbt``, answering as ``dbtRunner.invoke`` does); the real one runs it in
the end-to-end tests (the `accessgov` job, tests/test_evidence_models.py)."""

from __future__ import annotations

import typing as t
from dataclasses import dataclass, field

import pytest

from scripts.dbt_build_and_prune import PRUNE, build_and_prune


@dataclass
class Answer:
    success: bool = True
    exception: BaseException | None = None
    result: t.Any = None


@dataclass
class FakeDbt:
    """Makes runners as ``dbtRunner`` does; records each invocation with the manifest its
    runner was given, and answers from ``answers`` (by command), success otherwise."""

    answers: dict[str, Answer] = field(default_factory=dict)
    calls: list[tuple[list[str], t.Any]] = field(default_factory=list)

    def __call__(self, manifest: t.Any = None) -> FakeDbt.Runner:
        return FakeDbt.Runner(self, manifest)

    @dataclass
    class Runner:
        dbt: FakeDbt
        manifest: t.Any

        def invoke(self, args: list[str]) -> Answer:
            self.dbt.calls.append((args, self.manifest))
            if args == ["parse"]:
                return self.dbt.answers.get("parse", Answer(result="the parsed project"))
            return self.dbt.answers.get(args[0], Answer())


def test_the_build_and_the_prune_share_one_parse_of_the_project():
    dbt = FakeDbt()
    assert build_and_prune(dbt, ["--select", "staging"]) == 0
    assert dbt.calls == [
        (["parse"], None),
        (["build", "--select", "staging"], "the parsed project"),
        (PRUNE, "the parsed project"),
    ]
    assert PRUNE == ["run-operation", "prune_raw_snapshots"]


@pytest.mark.parametrize(
    ("build", "status"),
    [(Answer(success=False), 1), (Answer(success=False, exception=RuntimeError("boom")), 2)],
    ids=["a node failed", "dbt could not run"],
)
def test_a_build_that_failed_skips_the_prune_with_dbts_exit_status(build: Answer, status: int):
    dbt = FakeDbt(answers={"build": build})
    assert build_and_prune(dbt, []) == status
    assert [args for args, _ in dbt.calls] == [["parse"], ["build"]]


def test_a_project_that_does_not_parse_builds_nothing():
    dbt = FakeDbt(answers={"parse": Answer(success=False, exception=RuntimeError("bad yaml"))})
    assert build_and_prune(dbt, []) == 2
    assert [args for args, _ in dbt.calls] == [["parse"]]


def test_a_prune_that_failed_fails_the_command():
    dbt = FakeDbt(answers={"run-operation": Answer(success=False)})
    assert build_and_prune(dbt, []) == 1
    assert [args for args, _ in dbt.calls] == [["parse"], ["build"], PRUNE]
