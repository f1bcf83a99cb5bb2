"""An epoch's ops netted per input relation: its base facts' Versions with the net change.

A fact inserted that is already present, or removed that is absent, is a no-op (said in a
note); what is present is looked up in the driver's index of base facts (state/base_index.py),
else by one Spark join. Reads and extends an `IncrementalSession`'s pending bases.
"""

from __future__ import annotations

from levelflow.engine.incremental.backends.driver_rows import frame_of_rows
from levelflow.engine.incremental.state.base_delta import BaseDelta
from levelflow.engine.incremental.updates import Op
from levelflow.engine.incremental.versions import Versions
from levelflow.engine.types import column_names, rows_frame


def present(session, relation: str, rows) -> set[tuple]:
    """Return which of `rows` are base facts of `relation` now."""
    import pyspark.sql.functions as F

    decl = session.program.decls[relation]
    if not session.snap.base_rows[relation] or not rows:
        return set()
    if decl.arity == 0:
        return {()}
    found = session.base_index.present(session.snap, relation, decl, list(rows))
    if found is not None:
        return found
    probe = rows_frame(session.spark, decl, list(rows))
    hits = session.snap.base[relation].join(F.broadcast(probe), column_names(decl.arity),
                                            "left_semi")
    return {tuple(r) for r in hits.collect()}


def net_change(session, ops) -> tuple[dict[str, Versions], list[str]]:
    """Return per input relation its base Versions with the net change set, and notes."""
    by_rel: dict[str, list[Op]] = {}
    for op in ops:
        by_rel.setdefault(op.relation, []).append(op)
    base, notes = {}, []
    for name in session.program.inputs:
        decl = session.program.decls[name]
        ver = Versions(decl, session.snap.base[name], session.snap.base_rows[name])
        base[name] = ver
        if name not in by_rel:
            continue
        touched = list(dict.fromkeys(op.row for op in by_rel[name]))
        initial = present(session, name, touched)
        state = {row: row in initial for row in touched}
        noop_ins = noop_rem = 0  # ops on facts present (absent) before the epoch only:
        for op in by_rel[name]:  # a new fact listed twice is not "already present"
            was = op.row in initial
            if op.sign > 0:
                noop_ins += state[op.row] and was
                state[op.row] = True
            else:
                noop_rem += not state[op.row] and not was
                state[op.row] = False
        if noop_ins:
            notes.append(f"note: {noop_ins} inserted fact(s) of {name} already present "
                         f"(no-op)")
        if noop_rem:
            notes.append(f"note: {noop_rem} removed fact(s) of {name} not present (no-op)")
        plus = [r for r in touched if state[r] and r not in initial]
        minus = [r for r in touched if not state[r] and r in initial]
        if not plus and not minus:
            continue
        session._changed[name] = (decl, plus, minus)
        plus_df = frame_of_rows(session.spark, decl, plus) if plus else None
        minus_df = frame_of_rows(session.spark, decl, minus) if minus else None
        delta = session._base_deltas.get(name)
        if delta is None or delta.frame is not ver.old:  # the base was read or rebuilt
            delta = BaseDelta(ver.old, frozenset(), frozenset(), ver.old)
        session._pending_bases[name] = delta = delta.then(session.spark, decl, plus, minus,
                                                          plus_df, minus_df)
        # plus holds only absent facts and minus only present ones: the size needs no job
        ver.set_change(delta.frame, ver.old_rows + len(plus) - len(minus), plus_df,
                       len(plus), minus_df, len(minus))
    return base, notes
