"""Every program under tests/programs/ runs on Spark and writes exactly its expected outputs.

Each directory holds program.dl, facts/ and expected/*.csv; the expected files were computed by
tests/naive_datalog.py (a naive fixpoint over Python sets, not the engine) and checked by hand.
As in Soufflé's test harness, files are compared as sorted lines. expected/printsize.txt holds
the `.printsize` lines `name<TAB>count`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from levelflow.engine.evaluate import evaluate_program
from levelflow.engine.facts import output_path, write_relation
from levelflow.engine.plans import PLANS, PlanError, check_plan
from levelflow.engine.runner import run_program
from levelflow.tasks import build_tasks, load_program

PROGRAMS = Path(__file__).parent / "programs"
NAMES = sorted(p.name for p in PROGRAMS.iterdir() if (p / "program.dl").is_file())


def _sorted_lines(path: Path) -> list[str]:
    return sorted(path.read_text(encoding="utf-8").splitlines())


def _expected(name: str) -> dict[str, list[str]]:
    return {p.name: _sorted_lines(p) for p in (PROGRAMS / name / "expected").iterdir()}


def _has_recursion(name: str) -> bool:
    pt = build_tasks(load_program(PROGRAMS / name / "program.dl"))
    return any(t.recursive for t in pt.tasks)


# A task that is not recursive runs one pass as one job under partitioned as under global
# (plans/planner.py: choose_plan); only a forced local plan runs it differently. So a program
# without recursion runs under driver, local and global only. Auto runs these small programs
# in the driver (tests/test_driver_plan.py): the driver case is theirs.
# deep_chain's point is the local plan's one-tuple rounds; under global it is 30 rounds of the
# join-then-arithmetic shape countdown and fib already run round by round, for 15 s.
CASES = [(name, plan) for name in NAMES for plan in PLANS
         if plan != "auto" and (plan not in ("partitioned", "distributed") or
                                _has_recursion(name))
         and (name, plan) != ("deep_chain", "global")]


def _refused(pt, plan: str) -> bool:
    """Return whether a forced plan does not apply to one of the program's recursive tasks."""
    try:
        check_plan(pt, plan)
    except PlanError:
        return True
    return False


def test_there_are_enough_programs():
    assert len(NAMES) >= 20
    assert sum(_has_recursion(name) for name in NAMES) >= 10  # the cases keep every plan


@pytest.mark.parametrize("name, plan", CASES)
def test_program_outputs(spark, tmp_path, name, plan):
    program_dir = PROGRAMS / name
    pt = build_tasks(load_program(program_dir / "program.dl"))
    if plan in ("partitioned", "distributed") and _refused(pt, plan):
        # Forced where it does not apply: refused before anything runs, naming the task.
        with pytest.raises(PlanError, match=rf"^task .*: the {plan} plan does not apply"):
            run_program(spark, pt, program_dir / "facts", tmp_path, jobs=2, plan=plan)
        assert not any(tmp_path.iterdir())
        return
    result = run_program(spark, pt, program_dir / "facts", tmp_path, jobs=2, plan=plan)
    ran = {s.plan for s in result.task_stats if s is not None}
    assert plan == "auto" or ran <= {plan, "global"}, ran
    expected = _expected(name)
    printsize = expected.pop("printsize.txt", None)
    written = sorted(p.name for p in tmp_path.iterdir())
    assert written == sorted(expected)
    for fname, lines in expected.items():
        assert _sorted_lines(tmp_path / fname) == lines, fname
    if printsize is not None:
        assert sorted(f"{k}\t{v}" for k, v in result.printsize.items()) == printsize


@pytest.mark.parametrize("name", ["tc", "strata_chain"])
def test_evaluate_program_matches_run_program(spark, tmp_path, name):
    program_dir = PROGRAMS / name
    pt = build_tasks(load_program(program_dir / "program.dl"))
    run_program(spark, pt, program_dir / "facts", tmp_path / "run", jobs=2)
    relations = evaluate_program(spark, pt, program_dir / "facts")
    for rel, io in pt.program.outputs.items():
        decl = pt.program.decls[rel]
        count = write_relation(relations[rel], decl, output_path(io, tmp_path / "serial"))
        lines = _sorted_lines(output_path(io, tmp_path / "serial"))
        assert lines == _sorted_lines(output_path(io, tmp_path / "run"))
        assert count == len(lines)
