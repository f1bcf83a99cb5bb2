"""A program change as one epoch: which tasks keep their state, which run, and how.

Tasks are matched across programs by their set of relations. Per task of the new program:

- kept: same relations, declarations, input directives, storage (counted or ranked), rules
  (compared with locations ignored and variables renamed in order); it runs only if an input
  changed, like any task in any epoch;
- updated: as kept, but its rules differ and some rule with a body stays: it is maintained
  from the difference of its rules (below), under the elastic switch like any update;
- recomputed: anything else of which some relation existed (the task was regrouped, a
  relation was redeclared, it reads a redeclared relation, ...): evaluated from scratch, then
  diffed against its old tuples so its dependents get a net change;
- new: none of its relations existed.

Old tasks none of whose relations remain are dropped. A relation whose arity or attribute types
changed is rebuilt: its old tuples are treated as empty and none of its stored files is built
on (the commit writes it as a new base); a redeclared input's base facts start from the facts
given (`--facts`), else empty with a note. A declaration that only renames attributes keeps the
relation and its facts as they are.

The rule difference is maintained by the unchanged counting and DRed code through two gates:
stand-in unary relations joined in front of the changed rules. `@on` goes from empty to one
row (rules added), `@off` from one row to empty (rules removed). Counting then adds the added
rules' derivations over the new inputs and subtracts the removed rules' over the old ones;
DRed takes the removed rules' old heads as deletion candidates (re-checked for support under
the rules that stay) and seeds its insertion with the added rules' heads.
"""

from __future__ import annotations

import dataclasses
from collections import ChainMap, Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from levelflow.engine.incremental.state.snapshot import COUNT, Snapshot
from levelflow.engine.incremental.versions import TaskContext, Versions
from levelflow.engine.limitsize import limit_of
from levelflow.errors import LevelflowError
from levelflow.tasks.ast import Atom, BinOp, Call, Comparison, Decl, Negation, Rule, Var

if TYPE_CHECKING:
    from levelflow.engine.incremental.epoch import Epoch
    from levelflow.engine.incremental.results import EpochResult
    from levelflow.tasks.tasks import ProgramTasks, Task

STATUSES = ("kept", "updated", "recomputed", "new", "dropped")
GATE_ON = "@on"  # stand-in relation: empty before the epoch, one row after (rules added)
GATE_OFF = "@off"  # stand-in relation: one row before the epoch, empty after (rules removed)
GATE_VAR = "@g"  # a variable the parser cannot produce
_GATE_DECL = {g: Decl(g, ("g",), ("number",)) for g in (GATE_ON, GATE_OFF)}


# -- comparing rules ----------------------------------------------------------------------------

def _term(t, names: dict):
    """Return a term with its variables renamed in order of first appearance."""
    if isinstance(t, Var):
        return Var(names.setdefault(t.name, f"v{len(names)}"))
    if isinstance(t, BinOp):
        return BinOp(t.op, _term(t.left, names), _term(t.right, names))
    if isinstance(t, Call):
        return Call(t.name, tuple(_term(a, names) for a in t.args))
    return t  # constants and wildcards compare without their locations


def _atom(a: Atom, names: dict) -> Atom:
    return Atom(a.relation, tuple(_term(t, names) for t in a.args))


def normalized(rule: Rule) -> Rule:
    """Return the rule with locations dropped and variables renamed v0, v1.. in order."""
    names: dict[str, str] = {}
    heads = tuple(_atom(h, names) for h in rule.heads)
    body = []
    for lit in rule.body:
        if isinstance(lit, Atom):
            body.append(_atom(lit, names))
        elif isinstance(lit, Negation):
            body.append(Negation(_atom(lit.atom, names)))
        else:
            body.append(Comparison(lit.op, _term(lit.left, names), _term(lit.right, names)))
    return Rule(heads, tuple(body))


def rule_difference(old: tuple[Rule, ...], new: tuple[Rule, ...]) -> tuple[list, list]:
    """Return (rules added, rules removed) as multisets: a duplicated rule counts twice."""
    old_n, new_n = Counter(map(normalized, old)), Counter(map(normalized, new))
    added_n, removed_n = new_n - old_n, old_n - new_n
    added, removed = [], []
    for rules, want, out in ((new, added_n, added), (old, removed_n, removed)):
        for rule in rules:
            key = normalized(rule)
            if want[key] > 0:
                want[key] -= 1
                out.append(rule)
    return added, removed


# -- the diff of two programs -------------------------------------------------------------------

@dataclass
class ProgramChange:
    """What moving from `old` to `new` does: per new task its plan, and what is dropped."""

    old: ProgramTasks
    new: ProgramTasks
    counted: set[str]  # the new program's counted relations
    plan: dict[int, str]  # new task id -> kept | updated | recomputed | new
    diffs: dict[int, tuple[list[Rule], list[Rule]]]  # updated task -> (added, removed)
    dropped: list[str]  # old task names none of whose relations remain
    dropped_relations: list[str]
    rebuilt: set[str]  # relations in both programs whose declaration changed
    new_inputs: list[str]  # input relations whose base facts start from --facts
    gates: dict = field(default_factory=dict)  # gate name -> Versions (set by `prepare`)

    @property
    def same(self) -> bool:
        """Return whether the programs define the same tasks with the same rules."""
        return not self.dropped and all(p == "kept" for p in self.plan.values())

    def activated(self) -> set[int]:
        """Return the tasks that run whatever the facts: updated, recomputed and new ones."""
        return {v for v, p in self.plan.items() if p != "kept"}

    def forced(self, v: int) -> bool:
        """Return whether task v is evaluated from scratch (recomputed or new)."""
        return self.plan[v] in ("recomputed", "new")

    def prepare(self, spark) -> None:
        """Make the gates' Versions (one-row frames the driver holds: no JVM call until a
        Spark task reads one) before the epoch's workers start."""
        from levelflow.engine.incremental.backends.driver_rows import frame_of_rows, held_empty

        for name, decl in _GATE_DECL.items():
            one, none = frame_of_rows(spark, decl, [(0,)]), held_empty(spark, decl)
            ver = Versions(decl, none if name == GATE_ON else one, 0 if name == GATE_ON else 1)
            if name == GATE_ON:
                ver.set_change(one, 1, one, 1, None, 0)
            else:
                ver.set_change(none, 0, None, 0, one, 1)
            self.gates[name] = ver

    def task_context(self, epoch: Epoch, v: int) -> tuple[Task, TaskContext]:
        """Return the task an update maintains and its context: gated rules if they changed."""
        task = epoch.pt.tasks[v]
        if v not in self.diffs:
            return task, epoch.ctx
        added, removed = self.diffs[v]
        kept = list(task.rules)
        for rule in added:
            kept.remove(rule)
        rules = tuple(kept) + tuple(_gated(r, GATE_ON) for r in added) + \
            tuple(_gated(r, GATE_OFF) for r in removed)
        gated = dataclasses.replace(task, rules=rules, reads=task.reads | set(_GATE_DECL))
        program = dataclasses.replace(epoch.program, decls={**epoch.program.decls, **_GATE_DECL})
        c = epoch.ctx
        ctx = TaskContext(c.spark, program, ChainMap(self.gates, epoch.versions), c.old_counts,
                          c.base, c.old_ranked, c.max_rank)
        return gated, ctx

    def statuses(self, epoch: Epoch) -> dict[str, str]:
        """Return per task name kept / updated / recomputed / new / dropped, as it ran."""
        out = {}
        for task in self.new.tasks:
            upd = epoch.updates.get(task.id)
            if self.plan[task.id] == "new":
                out[task.name] = "new"
            elif upd is None:
                out[task.name] = "kept"
            else:
                out[task.name] = "updated" if upd.strategy in ("counting", "dred") \
                    else "recomputed"
        out.update(dict.fromkeys(self.dropped, "dropped"))
        return out


def _gated(rule: Rule, gate: str) -> Rule:
    """Return the rule with the gate joined in front of its body (a fact gets a body)."""
    return Rule(rule.heads, (Atom(gate, (Var(GATE_VAR),)),) + rule.body, rule.loc)


def diff_programs(old: ProgramTasks, new: ProgramTasks) -> ProgramChange:
    """Return the ProgramChange from `old` to `new` (pure: no Spark)."""
    from levelflow.engine.incremental.strategies.counting_spark import counted_relations

    op, np_ = old.program, new.program
    old_counted, new_counted = counted_relations(old), counted_relations(new)
    # Attribute names are not part of a relation's meaning (Soufflé's neither): a declaration
    # that renames them only keeps its tuples; another arity or type rebuilds the relation.
    rebuilt = {n for n in set(op.decls) & set(np_.decls)
               if op.decls[n].types != np_.decls[n].types}
    by_set = {frozenset(t.relations): t for t in old.tasks}
    plan, diffs = {}, {}
    for task in new.tasks:
        before = by_set.get(frozenset(task.relations))
        plan[task.id] = _classify(task, before, op, np_, rebuilt, old_counted, new_counted)
        if plan[task.id] == "updated":
            added, removed = diffs[task.id] = rule_difference(before.rules, task.rules)
            if not added and not removed:
                plan[task.id] = "kept"
                del diffs[task.id]
            elif any(r not in np_.decls or r in rebuilt for rule in removed for r in rule.reads()):
                # A removed rule read a relation that is gone: its old derivations cannot be
                # evaluated (the relation is not in the new program's versions).
                plan[task.id] = "recomputed"
                del diffs[task.id]
        if plan[task.id] in ("kept", "updated") and rebuilt & set(task.reads_from):
            plan[task.id] = "recomputed"  # a relation it reads was rebuilt: its old is void
            diffs.pop(task.id, None)
    remaining = set(np_.decls)
    dropped = [t.name for t in old.tasks if not remaining & set(t.relations)]
    new_inputs = [n for n in np_.inputs if n not in op.inputs or n in rebuilt]
    return ProgramChange(old, new, new_counted, plan, diffs, dropped,
                         [n for n in op.decls if n not in np_.decls], rebuilt, new_inputs)


def _classify(task: Task, before: Task | None, op, np_, rebuilt, old_counted,
              new_counted) -> str:
    """Return the plan of one new task before its rules are compared: new, recomputed or
    updated (which becomes kept when its rules turn out equal)."""
    rels = task.relations
    if not any(n in op.decls for n in rels):
        return "new"
    if before is None or rebuilt & set(rels) or before.recursive != task.recursive or \
            any(limit_of(op, n) != limit_of(np_, n) for n in rels):  # another N kept
        return "recomputed"
    if any((n in op.inputs) != (n in np_.inputs) or (n in old_counted) != (n in new_counted)
           for n in rels):
        return "recomputed"
    added, removed = rule_difference(before.rules, task.rules)
    if (task.subsumes or before.subsumes) and \
            (added or removed or any(rule_difference(before.subsumes, task.subsumes))):
        return "recomputed"  # its pruned tuples hold no record of the rules that made them
    stay = len([r for r in task.rules if r.body]) - len([r for r in added if r.body])
    if (added or removed) and stay <= 0:
        return "recomputed"  # nothing of the old evaluation survives: scratch is cheaper
    return "updated"


# -- the snapshot under the new program ---------------------------------------------------------

def adapt_snapshot(spark, snap: Snapshot, change: ProgramChange) -> Snapshot:
    """Return the old epoch's snapshot seen through the new program (same epoch number).

    Dropped relations are left out; new and rebuilt ones are empty; a relation whose storage
    changed (counted <-> ranked) keeps its tuples with a placeholder count or rank: its task
    is recomputed, so the placeholder is never read. Rows the driver holds stay held, and a
    new relation is held empty: nothing here starts Spark.
    """
    from levelflow.engine.evaluate import RANK
    from levelflow.engine.incremental.backends.driver_rows import held_empty, with_constant

    prog, old = change.new.program, change.old.program
    counted = change.counted
    rel, rows, where, pieces, max_rank = {}, {}, {}, {}, {}
    for n, decl in prog.decls.items():
        extra = COUNT if n in counted else RANK
        if n in old.decls and n not in change.rebuilt:
            same = (n in snap.counted) == (n in counted)
            rel[n] = snap.rel[n] if same else with_constant(spark, snap.tuples(n), decl, extra, 0)
            rows[n], where[n] = snap.rows[n], snap.where.get(n)
            pieces[n] = snap.pieces.get(n, 1)
            if extra == RANK:
                max_rank[n] = snap.max_rank.get(n, 0) if same else 0
        else:
            rel[n] = held_empty(spark, decl, extra)
            rows[n], where[n] = 0, None
            if extra == RANK:
                max_rank[n] = 0
    base, base_rows, base_where = {}, {}, {}
    for n in prog.inputs:
        if n in snap.base and n not in change.new_inputs:
            base[n], base_rows[n], base_where[n] = snap.base[n], snap.base_rows[n], \
                snap.base_where.get(n)
        else:
            base[n], base_rows[n], base_where[n] = held_empty(spark, prog.decls[n]), 0, None
    keep = {change.new.tasks[v].name for v, p in change.plan.items() if p in ("kept", "updated")}
    scratch = {t: s for t, s in snap.scratch_seconds.items() if t in keep}
    # A relation kept keeps its stored copy, labels and all (closure_labels.py).
    labelled = {n for n in snap.labelled if n in rel and n in old.decls and
                n not in change.rebuilt}
    return Snapshot(snap.epoch, rel, base, rows, base_rows, set(counted), scratch, where,
                    base_where, pieces, max_rank, labelled=labelled)


def new_input_facts(spark, change: ProgramChange, factdir, driver_rows: int | None = None
                    ) -> tuple[dict[str, tuple], list[str]]:
    """Return per new input relation with a fact file in `factdir` the facts it starts from
    (frame, rows), and notes. A fact file the driver holds is read there, as a bootstrap reads
    it: no Spark job."""
    from levelflow.engine.facts import input_missing, input_path, missing_input_warning
    from levelflow.engine.incremental.state.base_index import read_base
    from levelflow.engine.spark_io import frame_kind
    from levelflow.tasks.ordinals import ORD

    prog = change.new.program
    facts, notes = {}, []
    for name in change.new_inputs:
        if name == ORD:  # made from the other inputs once the epoch's ops are netted
            continue
        io = prog.inputs[name]
        path = input_path(io, factdir) if factdir is not None else None
        if frame_kind(io) is not None:  # read from Parquet or a table, which say what is wrong
            path = io.option("table") or io.file_name
        what = "redeclared input relation" if name in change.rebuilt else "new input relation"
        if path is None or (frame_kind(io) is None and input_missing(path)):
            # A new input's file is optional (a program change may come before its facts):
            # read as empty, as Soufflé reads a missing fact file, and said so.
            notes.append(f"note: {what} {name} starts empty" if path is None else
                         missing_input_warning(path, name))
            continue
        if name in change.rebuilt:
            notes.append(f"note: {what} {name} starts from {path}, its old facts dropped")
        facts[name] = read_base(spark, prog.decls[name], io, factdir, driver_rows)[:2]
    return facts, notes


def net_from_facts(staged, ops, facts: dict[str, tuple], new_constants: bool
                   ) -> tuple[dict[str, Versions], list[str]]:
    """Return the epoch's base Versions and notes: the ops netted against each input's stored
    base, and a new input's against the facts it starts from (`facts`: new_input_facts'), so
    that removing one of them removes it and inserting one is a no-op; what is left of those
    is the new input's change, all of it inserted."""
    from levelflow.engine.evaluate import cut
    from levelflow.engine.incremental.backends.driver_rows import rows_of

    snap = staged.snap
    seeded = dataclasses.replace(
        snap, base={**snap.base, **{n: df for n, (df, _) in facts.items()}},
        base_rows={**snap.base_rows, **{n: rows for n, (_, rows) in facts.items()}})
    base, notes = staged.staged(staged.pt, staged.program_text, seeded)._net_change(
        ops, new_constants=new_constants)
    for name in facts:
        left, ver = base[name], Versions(base[name].decl, snap.base[name], 0)
        new, rows = left.new, left.new_rows
        if rows and left.changed and rows_of(new) is None:
            new, rows = cut(new)
        if rows:
            ver.set_change(new, rows, new, rows, None, 0)
        base[name] = ver
    return base, notes


def seed_ordinals(spark, change: ProgramChange, base: dict) -> None:
    """Give `ord`'s table, if the program change brings it in, its rows as the base change:
    the new program's constants, then the symbols of the inputs after the epoch."""
    from levelflow.engine.incremental.backends.driver_rows import frame_of_rows
    from levelflow.engine.ordinals import seed_rows
    from levelflow.tasks.ordinals import ORD

    if ORD not in change.new_inputs:
        return
    ver = base[ORD]
    rows = seed_rows(change.new.program.inputs[ORD], base)
    new = frame_of_rows(spark, ver.decl, rows)
    ver.set_change(new, len(rows), new, len(rows), None, 0)


def change_notes(change: ProgramChange) -> list[str]:
    """Return the notes a program change prints: relations dropped and rebuilt."""
    notes = []
    if change.dropped_relations:
        notes.append("note: dropped relation(s) " + ", ".join(change.dropped_relations))
    if change.rebuilt:
        notes.append("note: rebuilt relation(s) with a new declaration " +
                     ", ".join(sorted(change.rebuilt)))
    return notes


def status_lines(result: EpochResult) -> list[str]:
    """Return the report's lines per status: 'kept: a, b' (only statuses some task has)."""
    by: dict[str, list[str]] = {s: [] for s in STATUSES}
    for name, s in result.status.items():
        by[s].append(name)
    return [f"{s}: {', '.join(names)}" for s, names in by.items() if names]


class ProgramChangeError(LevelflowError):
    """A new program's facts directory is unusable."""


def load_new_program(program, factdir=None) -> ProgramTasks:
    """Return the new program's tasks (from a path or ProgramText), checked as `run` checks a
    program (no Spark)."""
    from levelflow.engine.incremental.program_text import load_tasks

    program_tasks, _ = load_tasks(program)  # DatalogError: one line, as `run` says
    if factdir is not None and not Path(factdir).is_dir():
        raise ProgramChangeError(f"{factdir}: error: --facts: not a directory")
    return program_tasks


# -- the epoch ------------------------------------------------------------------------------------

def replace_program(session, program, factdir=None, *, progress=None,
                    before_switch=None) -> EpochResult:
    """Return the EpochResult of moving `session` to `program`, with its pending ops, as one
    epoch (atomic: on any error the session and the state stay at the old program)."""
    from levelflow.engine.incremental.program_text import load_tasks
    from levelflow.engine.incremental.updates import Op, coerce_row
    from levelflow.tasks.ordinals import ORD

    pt, text = load_tasks(program)  # parse and type errors: before anything runs
    change = diff_programs(session.pt, pt)
    # The queued ops were checked against the old program: they must fit the new one too.
    ops = [Op(op.sign, op.relation, coerce_row(pt.program, op.relation, op.row, held=True))
           for op in session.pending]
    pending, session.pending = session.pending, []
    try:
        with session._writing():
            snap = adapt_snapshot(session.spark, session.snap, change)
            staged = session.staged(pt, text, snap)
            keeps_ord = ORD in pt.program.inputs and ORD not in change.new_inputs
            facts, seed_notes = new_input_facts(session.spark, change, factdir,
                                                session.driver_rows)
            base, notes = net_from_facts(staged, ops, facts, keeps_ord)
            notes += seed_notes
            seed_ordinals(session.spark, change, base)
            change.prepare(session.spark)
            result = staged._run_epoch(base, before_switch=before_switch, progress=progress,
                                       change=change)
    except BaseException:
        session.pending = pending + session.pending  # nothing applied: the ops stay queued
        raise
    result.notes[:0] = change_notes(change) + notes
    session.pt, session.program, session.program_text = pt, pt.program, text
    session.snap, session.last = staged.snap, result
    return result
