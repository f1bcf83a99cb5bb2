"""The rank invariant DRed relies on, checked by a plain Python reference after every epoch.

Every tuple of a DRed-maintained relation carries a rank; a tuple of rank r must be a base or
program fact, or have a derivation whose own-task body tuples all have ranks below r (a rule
over lower relations only counts as such a derivation). If an update broke this, a later
deletion could keep a tuple that lost its last real derivation.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest
from test_incremental_properties import FAMILIES, SIZES, random_epochs, rows_of, write_facts

from levelflow.engine.evaluate import RANK
from levelflow.engine.incremental import IncrementalSession
from levelflow.tasks import build_tasks, parse_program
from levelflow.tasks.ast import Atom

sys.path.insert(0, str(Path(__file__).parent))
import naive_datalog  # noqa: E402


def ranked_rows(session, name) -> dict[tuple, int]:
    """Return tuple -> rank of a DRed-maintained relation."""
    cols = [c for c in session.snap.rel[name].columns if c != RANK]
    return {tuple(r[c] for c in cols): r[RANK] for r in session.snap.rel[name].collect()}


def has_lower_derivation(task, name, row, rank, ranks, db) -> bool:
    """Return whether a program fact is `row`, or a rule derives it from own tuples below rank."""
    own = set(task.relations)
    for rule in task.rules:
        head = rule.heads[0]
        env = naive_datalog.match(head, row, {}) if head.relation == name else None
        if env is None:
            continue
        if not rule.body:
            return True
        lower_db = dict(db)
        for lit in rule.body:
            if isinstance(lit, Atom) and lit.relation in own:
                lower_db[lit.relation] = {t for t, r in ranks[lit.relation].items() if r < rank}
        for _ in naive_datalog.solve(list(rule.body), lower_db, env):
            return True
    return False


@pytest.mark.parametrize("family,seed", [("tc", 5), ("sg", 6), ("pointsto", 7)])
def test_every_tuple_has_a_derivation_from_lower_ranks(spark, tmp_path, family, seed):
    text, gens = FAMILIES[family]
    rng = random.Random(seed)
    pt = build_tasks(parse_program(text, f"{family}.dl"))
    facts = {name: {gen(rng) for _ in range(SIZES[name])} for name, gen in gens.items()}
    write_facts(tmp_path / "f0", facts)
    session = IncrementalSession.bootstrap(spark, pt, tmp_path / "f0", mode="incremental")
    recursive = [t for t in pt.tasks if t.recursive]
    assert recursive
    checked = 0
    for ops in random_epochs(rng, gens, facts, 4):
        for sign, name, row in ops:
            (session.insert if sign > 0 else session.remove)(name, row)
        session.commit()
        db = {n: rows_of(session.relation(n)) for n in pt.program.decls}
        for task in recursive:
            ranks = {n: ranked_rows(session, n) for n in task.relations}
            for name in task.relations:
                base = rows_of(session.snap.base[name]) if name in pt.program.inputs else set()
                assert set(ranks[name]) == db[name]
                assert session.snap.max_rank[name] >= max(ranks[name].values(), default=0)
                for row, rank in ranks[name].items():
                    assert row in base or has_lower_derivation(
                        task, name, row, rank, ranks, db), (name, row, rank)
                    checked += 1
    assert checked > 20
