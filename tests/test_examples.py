"""Every example in examples/ runs and writes exactly its expected/ files (sorted lines).

The expected outputs were computed outside levelflow (plain Python sets, checked by hand), as
Soufflé's test harness compares them: the same files, the same lines in any order.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from levelflow.engine.api import load
from levelflow.engine.runner import run_program

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
NAMES = sorted(p.name for p in EXAMPLES.iterdir() if (p / "program.dl").is_file())


def _sorted_lines(directory: Path) -> dict[str, list[str]]:
    return {p.name: sorted(p.read_text().splitlines()) for p in sorted(directory.glob("*.csv"))}


def test_the_three_required_examples_exist():
    assert {"tc", "pointsto", "negation"} <= set(NAMES)
    for name in NAMES:
        assert list((EXAMPLES / name / "expected").glob("*.csv")), name


@pytest.mark.parametrize("name", NAMES)
def test_example_outputs_equal_expected(spark, tmp_path, name):
    example = EXAMPLES / name
    result = run_program(spark, load(example / "program.dl"), example / "facts", tmp_path,
                         jobs=2)
    expected = _sorted_lines(example / "expected")
    assert _sorted_lines(tmp_path) == expected
    # .printsize counts agree with the expected files' line counts.
    for relation, count in result.printsize.items():
        assert count == len(expected[f"{relation}.csv"]), relation
    assert result.ran == result.total  # every example's inputs are non-empty
