"""Run a program of Soufflé surface syntax three ways and check each against expected tuples.

1. the naive reference (tests/naive_datalog.py) on the lowered program equals `expected`
   (tuples derived by hand in the test);
2. the engine from scratch (`evaluate_program`) equals the reference on every relation;
3. an incremental session: one epoch removing a sample of the inputs, one re-inserting them;
   after each, every relation equals the reference on the facts of that moment.
"""

from __future__ import annotations

import sys
from pathlib import Path

from levelflow.engine.evaluate import evaluate_program
from levelflow.engine.incremental import IncrementalSession
from levelflow.tasks import build_tasks, parse_program

sys.path.insert(0, str(Path(__file__).parent))
import naive_datalog  # noqa: E402


def write_facts(factdir: Path, facts: dict[str, set]) -> None:
    """Write each input's tuples as REL.facts (tab-separated)."""
    factdir.mkdir(parents=True, exist_ok=True)
    for name, rows in facts.items():
        (factdir / f"{name}.facts").write_text(
            "".join("\t".join(map(str, row)) + "\n" for row in sorted(rows)))


def rows_of(df) -> set[tuple]:
    """Return a DataFrame's rows as a set of tuples."""
    return {tuple(r) for r in df.collect()}


def _reference(pt, facts: dict[str, set], factdir: Path) -> dict[str, set]:
    write_facts(factdir, facts)
    return naive_datalog.evaluate(pt, factdir)


def _agrees(got: dict[str, set], ref: dict[str, set], when: str) -> None:
    for name, rows in ref.items():
        assert got[name] == rows, f"{when}: {name}: extra {got[name] - rows}, missing " \
                                  f"{rows - got[name]}"


def check_lowered(spark, tmp_path: Path, text: str, facts: dict[str, set],
                  expected: dict[str, set], sample: int = 2, program=None) -> None:
    """Check `text` on `facts` against `expected`, from scratch and through one epoch pair."""
    pt = build_tasks(program if program is not None else parse_program(text, "t.dl"))
    ref = _reference(pt, facts, tmp_path / "f0")
    for name, rows in expected.items():
        assert ref[name] == rows, f"reference {name}: {sorted(ref[name])} != {sorted(rows)}"
    scratch = evaluate_program(spark, pt, tmp_path / "f0")
    _agrees({n: rows_of(scratch[n]) for n in pt.program.decls}, ref, "from scratch")
    session = IncrementalSession.bootstrap(spark, pt, tmp_path / "f0", mode="incremental")
    try:
        removed = {name: sorted(rows)[:sample] for name, rows in facts.items()}
        for name, rows in removed.items():
            for row in rows:
                session.remove(name, row)
        session.commit()
        fewer = {name: rows - set(removed[name]) for name, rows in facts.items()}
        ref1 = _reference(pt, fewer, tmp_path / "f1")
        _agrees({n: rows_of(session.relation(n)) for n in pt.program.decls}, ref1, "epoch 1")
        for name, rows in removed.items():
            for row in rows:
                session.insert(name, row)
        session.commit()
        _agrees({n: rows_of(session.relation(n)) for n in pt.program.decls}, ref, "epoch 2")
    finally:
        session.close()
