"""Semi-naive rounds one tuple at a time: for the stretches of a fixpoint whose deltas are tiny.

A round over frames costs a Polars plan per rule variant (~1 ms) whatever its delta; a chain
of a million one-tuple rounds would take an hour. Here each rule variant is compiled once into
nested Python closures that probe hash indexes, so a round with a tiny delta costs microseconds.
Same rounds as fixpoint.py: the variant whose delta atom is the k-th own atom reads `recent`
there, `stable` (all but recent) before it and everything after it; expressions, comparisons
and casts are tuple_terms.py's closures (rules.py's and columnar.py's semantics).
Each probe and head is specialised when compiled: a test of a lower relation by a constant key
(`@exists_()`, tasks/exists.py) is decided then, and a head keeps only tuples not yet held.
Constant: the compiled variants, the lower relations' indexes. Changes: each own relation's
tuples, its recent delta, the round's new tuples, the stretch's log and its indexes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial

from levelflow.engine import rules as R
from levelflow.engine.plans.tuple_terms import COMPARE, ClosureOps
from levelflow.engine.rule_body import ordered_unsigned
from levelflow.tasks.ast import (
    Atom,
    BinOp,
    Comparison,
    Const,
    Decl,
    Negation,
    Rule,
    Var,
)

Env = list  # one slot per variable (and per waiting expression argument)


class Source:
    """The tuples an atom reads, with hash indexes on the positions a probe binds."""

    __slots__ = ("rows", "indexes")

    def __init__(self, rows) -> None:
        self.rows = rows  # a set (own relations) or list (lower relations) of tuples
        self.indexes: dict[tuple[int, ...], dict[tuple, list]] = {}

    def index(self, positions: tuple[int, ...]) -> dict[tuple, list]:
        """Return the index on `positions` (built on first use, then kept up to date)."""
        idx = self.indexes.get(positions)
        if idx is None:
            idx = self.indexes[positions] = {}
            for t in self.rows:
                idx.setdefault(tuple(t[p] for p in positions), []).append(t)
        return idx

    def add(self, new) -> None:
        """Add tuples (not yet present) to the rows and every index."""
        self.rows.update(new)
        self.index_new(new)

    def index_new(self, new) -> None:
        """Add tuples to every index (the rows hold them already)."""
        for positions, idx in self.indexes.items():
            for t in new:
                idx.setdefault(tuple([t[p] for p in positions]), []).append(t)


class Own(Source):
    """An own relation of the task: every tuple so far, the last round's (`recent`), the head
    tuples this round found that are not in it yet (`found`), and the tuples of the rounds
    run since `taken` with the round of each (`log`, `ranks`)."""

    __slots__ = ("recent", "recent_set", "found", "log", "ranks")

    def __init__(self, rows: set, recent: list) -> None:
        super().__init__(rows)
        self.recent = recent
        self.recent_set: set | None = None  # built by the first STABLE probe of a round
        self.found: set = set()
        self.log: list[tuple] = []
        self.ranks: list[int] = []

    def taken(self) -> tuple[list[tuple], list[int]]:
        """Return the logged tuples and their rounds, and start a new log."""
        log, ranks = self.log, self.ranks
        self.log, self.ranks = [], []
        return log, ranks


# How an own atom of a variant reads its relation.
RECENT, STABLE, FULL, LOWER = range(4)


class Variant:
    """One rule body compiled for one delta atom: `runner()` derives a round's head tuples."""

    __slots__ = ("rule", "decls", "sources", "modes", "slots", "types", "steps", "visits")

    def __init__(self, rule: Rule, decls: Mapping[str, Decl], sources: Mapping[str, Source],
                 modes: Mapping[int, int], first: int, visits: list[int]) -> None:
        self.rule, self.decls, self.sources, self.modes = rule, decls, sources, modes
        self.slots: dict[str, int] = {}
        self.types: dict[str, str] = {}
        self.visits = visits  # [tuples the probes visited], shared by a task's variants
        self.steps = self._compile(first)

    def _slot(self, column: str) -> int:
        return self.slots.setdefault(column, len(self.slots))

    def _expr(self, term) -> tuple[Callable, str]:
        return R.term_expr(ClosureOps(self.slots), term, self.types)

    def _compile(self, first: int) -> Callable[[Env], None]:
        """Return the body as nested closures, atoms in join order, filters once bound."""
        body = self.rule.body
        todo = [i for i, lit in enumerate(body) if isinstance(lit, Atom)]
        pending = [i for i, lit in enumerate(body) if not isinstance(lit, Atom)]
        waiting: list[tuple[int, object]] = []  # (slot of the matched value, expression)
        plan: list[Callable] = []
        i = first
        while True:
            todo.remove(i)
            plan.append(self._atom(i, waiting))
            plan += self._ready(pending, waiting)
            if not todo:
                break
            i = max(todo, key=lambda j: (self._bound_args(j), -j))
        if pending or waiting:
            raise R.CompileError(f"{R.where(self.rule)}: error: a variable is not grounded")
        plan.append(self._heads())
        nxt = None
        for make in reversed(plan):
            nxt = make(nxt)
        return nxt

    def _bound_args(self, i: int) -> int:
        known = set(self.types)
        return sum(1 for a in self.rule.body[i].args if isinstance(a, Const)
                   or (isinstance(a, Var | BinOp) and R.term_vars(a) and R.term_vars(a) <= known))

    def _atom(self, i: int, waiting: list) -> Callable:
        """Return the step joining body atom i: probe its index on the bound arguments."""
        atom = self.rule.body[i]
        decl = self.decls[atom.relation]
        known = set(self.types)
        keys, binds, checks = [], [], []  # (position, value fn) / (position, slot) / (pos, pos)
        consts = []  # the keys' values while every key is a constant
        first_at: dict[str, int] = {}
        later = []
        for p, arg in enumerate(atom.args):
            if isinstance(arg, Const):
                value = float(arg.value) if decl.types[p] == "float" else arg.value
                keys.append((p, lambda env, v=value: v))
                consts.append(value)
            elif isinstance(arg, Var):
                if arg.name in known:
                    keys.append((p, self._expr(arg)[0]))
                elif arg.name in first_at:
                    checks.append((p, first_at[arg.name]))
                else:
                    first_at[arg.name] = p
                    binds.append((p, self._slot(R.var_col(arg.name))))
            elif isinstance(arg, BinOp):
                if R.term_vars(arg) <= known:
                    keys.append((p, self._expr(arg)[0]))
                else:
                    later.append((p, arg))
        for name, p in first_at.items():
            self.types[name] = decl.types[p]
        for p, arg in later:  # matched once its variables are bound (now or by a later atom)
            slot = self._slot(f"k{i}_{p}")
            binds.append((p, slot))
            waiting.append((slot, arg))
        # An atom that binds nothing (`c(_)`, `r(1, _)`) only says a tuple exists: once.
        return self._probe(atom.relation, self.modes.get(i, LOWER), tuple(p for p, _ in keys),
                           [f for _, f in keys], binds, checks,
                           tuple(consts) if len(consts) == len(keys) else None)

    def _probe(self, name, mode, positions, keyfns, binds, checks, consts) -> Callable:
        """Return the step reading atom `name`; `consts`: the key's values if all constant."""
        source = self.sources[name]
        if not binds and mode == LOWER and consts is not None:
            # A test of a lower relation whose key is constant (`@exists_()`, `c(_)`,
            # `r(1, _)`): its answer holds for the whole fixpoint, so it is decided here.
            held = source.index(positions).get(consts) if positions else source.rows
            return (lambda nxt: nxt) if held else (lambda nxt: _nothing)
        rows_of = _rows(source, mode, positions, keyfns)
        visits = self.visits

        def make(nxt):
            if not binds:  # binds nothing: only says a tuple exists, so continue once
                def step(env):
                    if rows_of(env):
                        nxt(env)
            elif len(binds) == 1 and not checks:
                ((p, slot),) = binds

                def step(env):
                    rows = rows_of(env)
                    visits[0] += len(rows)
                    for t in rows:
                        env[slot] = t[p]
                        nxt(env)
            else:
                def step(env):
                    rows = rows_of(env)
                    visits[0] += len(rows)
                    for t in rows:
                        if checks and any(t[p] != t[q] for p, q in checks):
                            continue
                        for p, slot in binds:
                            env[slot] = t[p]
                        nxt(env)
            return step
        return make

    def _ready(self, pending: list[int], waiting: list) -> list[Callable]:
        """Return the filters and bindings whose variables are now bound (as Body.apply_ready)."""
        steps = []
        progress = True
        while progress:
            progress = False
            known = set(self.types)
            for slot, term in list(waiting):
                if R.term_vars(term) <= known:
                    fn = self._expr(term)[0]
                    steps.append(_filter(lambda env, s=slot, f=fn: env[s] == f(env)))
                    waiting.remove((slot, term))
                    progress = True
            for i in list(pending):
                lit = self.rule.body[i]
                step = self._negation(lit) if isinstance(lit, Negation) else self._compare(lit)
                if step is not None:
                    steps.append(step)
                    pending.remove(i)
                    progress = True
        return steps

    def _negation(self, lit: Negation) -> Callable | None:
        if not R.literal_vars(lit) <= set(self.types):
            return None
        atom = lit.atom
        decl = self.decls[atom.relation]
        parts = [(p, self._expr(a)[0] if not isinstance(a, Const) else
                  (lambda env, v=(float(a.value) if decl.types[p] == "float" else a.value): v))
                 for p, a in enumerate(atom.args) if not isinstance(a, R.Wildcard)]
        positions = tuple(p for p, _ in parts)
        fns = [f for _, f in parts]
        source = self.sources[atom.relation]
        if not positions:
            return _filter(lambda env: not source.rows)
        idx = source.index(positions)  # kept up to date in place by Source.add
        return _filter(lambda env: tuple([f(env) for f in fns]) not in idx)

    def _compare(self, cmp: Comparison) -> Callable | None:
        known = set(self.types)
        if R.term_vars(cmp.left) | R.term_vars(cmp.right) <= known:
            (left, lt), (right, rt) = self._expr(cmp.left), self._expr(cmp.right)
            if ordered_unsigned(cmp.op, lt, rt):  # the bits read as unsigned
                ops = ClosureOps(self.slots)
                left, right = ops.order_key(left), ops.order_key(right)
            test = COMPARE[cmp.op]
            if isinstance(cmp.right, Const) and not ordered_unsigned(cmp.op, lt, rt):
                value = right(None)  # a literal's function reads no slot

                def against_const(nxt):  # `x < 100`: no call for the constant
                    def step(env):
                        a = left(env)
                        if a is not None and test(a, value):
                            nxt(env)
                    return step
                return against_const

            def compared(nxt):
                def step(env):
                    a, b = left(env), right(env)
                    if a is not None and b is not None and test(a, b):
                        nxt(env)
                return step
            return compared
        if cmp.op != "=":
            return None
        for var, expr in ((cmp.left, cmp.right), (cmp.right, cmp.left)):
            if isinstance(var, Var) and var.name not in known and R.term_vars(expr) <= known:
                fn, kind = self._expr(expr)
                slot = self._slot(R.var_col(var.name))
                self.types[var.name] = kind

                def make(nxt, fn=fn, slot=slot):
                    def step(env):
                        value = fn(env)
                        if value is not None:
                            env[slot] = value
                            nxt(env)
                    return step
                return make
        return None

    def _heads(self) -> Callable:
        """Return the last step: each own head's tuple, if new, into its relation's `found`
        (no value drops it; a head another task holds is not this fixpoint's)."""
        heads = []
        for head in self.rule.heads:
            own = self.sources.get(head.relation)
            if not isinstance(own, Own):
                continue
            decl = self.decls[head.relation]
            fns = tuple(self._head_value(a, t) for a, t in zip(head.args, decl.types,
                                                                 strict=True))
            heads.append((own.rows, own.found, fns))

        def make(_nxt):
            if len(heads) == 1 and len(heads[0][2]) == 1:  # the usual head: one column
                rows, found, (f,) = heads[0]

                def step(env):
                    v = f(env)
                    if v is not None:
                        row = (v,)
                        if row not in rows:
                            found.add(row)
                return step

            def step(env):
                for rows, found, fns in heads:
                    row = tuple([f(env) for f in fns]) if fns else (True,)
                    if None not in row and row not in rows:
                        found.add(row)
            return step
        return make

    def _head_value(self, arg, primitive: str) -> Callable:
        """Return a head argument's value as the column's type holds it."""
        fn, kind = self._expr(arg)
        if (kind == "float") == (primitive == "float"):
            return fn  # already held as the column holds it: no cast per tuple
        return ClosureOps(self.slots).cast(fn, primitive)

    def runner(self) -> Callable[[], None]:
        """Return a call adding the head tuples this variant derives in a round to `found`.

        One env serves every run: a step binds each slot before a later step reads it."""
        return partial(self.steps, [None] * len(self.slots))


def _rows(source: Source, mode: int, positions: tuple[int, ...], keyfns) -> Callable:
    """Return a function of the variable slots giving the tuples a probe of `source` reads."""
    one = keyfns[0] if len(keyfns) == 1 else None  # the usual probe: one bound argument

    def key(env):
        return (one(env),) if one is not None else tuple([f(env) for f in keyfns])
    if mode == RECENT:
        if not positions:
            return lambda env: source.recent
        return lambda env: (lambda k: [t for t in source.recent
                                       if tuple([t[p] for p in positions]) == k])(key(env))
    if mode == STABLE:
        full = _rows(source, FULL, positions, keyfns)

        def stable(env):
            rows, recent = full(env), source.recent
            if not recent:
                return rows
            if source.recent_set is None:
                source.recent_set = set(recent)
            return [t for t in rows if t not in source.recent_set]
        return stable
    if not positions:
        rows = list(source.rows) if mode == LOWER else source.rows  # lower ones never change
        return lambda env: rows
    idx = source.index(positions)  # kept up to date in place by Source.add
    if one is not None:
        return lambda env: idx.get((one(env),), ())
    return lambda env: idx.get(key(env), ())


def _nothing(env) -> None:
    """A step after a test that never holds: the variant derives nothing."""


def _filter(test: Callable[[Env], bool]) -> Callable:
    def make(nxt):
        def step(env):
            if test(env):
                nxt(env)
        return step
    return make


class TupleRounds:
    """A task's semi-naive rounds over Python tuples (fixpoint.py's, one tuple at a time)."""

    __slots__ = ("own", "sources", "by_delta", "visits", "owns")

    def __init__(self, rules, decls: Mapping[str, Decl], own: Mapping[str, Own],
                 lower: Mapping[str, list]) -> None:
        self.own = dict(own)
        self.sources: dict[str, Source] = {n: Source(rows) for n, rows in lower.items()}
        self.sources.update(self.own)
        self.visits = [0]
        runs: dict[str, list[Callable]] = {n: [] for n in self.own}
        for rule in rules:
            mine = [i for i, lit in enumerate(rule.body)
                    if isinstance(lit, Atom) and lit.relation in self.own]
            for k, pos in enumerate(mine):
                modes = {j: RECENT if j == pos else STABLE if j in mine[:k] else FULL
                         for j in mine}
                variant = Variant(rule, decls, self.sources, modes, pos, self.visits)
                runs[rule.body[pos].relation].append(variant.runner())
        # Per own relation the variants its delta drives, in rule order.
        self.by_delta = [(self.own[n], fns) for n, fns in runs.items() if fns]
        self.owns = tuple(self.own.values())

    def run(self, it: int, leave: int, most_visits: int, every: int,
            check: Callable[[], None]) -> tuple[int, bool]:
        """Run rounds after round `it` while a round's delta is 1 to `leave` tuples, logging
        each new tuple with its round; call `check` every `every` rounds. Return the last
        round and whether it stopped because a round's probes visited over `most_visits`."""
        visits, by_delta, owns = self.visits, self.by_delta, self.owns
        delta = sum(len(rel.recent) for rel in owns)
        while 0 < delta <= leave:
            it += 1
            start = visits[0]
            for rel, fns in by_delta:
                if rel.recent:
                    for run in fns:
                        run()
            delta = 0
            for rel in owns:  # found becomes recent; one loop, no call per relation
                found = rel.found
                if found:
                    rel.rows.update(found)
                    rel.recent = new = list(found)
                    found.clear()
                    if rel.indexes:
                        rel.index_new(new)
                    rel.recent_set = None
                    rel.log += new
                    rel.ranks += [it] * len(new)
                    delta += len(new)
                elif rel.recent:
                    rel.recent, rel.recent_set = [], None
            if it % every == 0:
                check()
            if visits[0] - start > most_visits:
                return it, True
        return it, False
