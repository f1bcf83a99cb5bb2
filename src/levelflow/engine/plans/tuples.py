"""Semi-naive rounds one tuple at a time: for the stretches of a fixpoint whose deltas are tiny.

A round over frames costs a Polars plan per rule variant (~1 ms) whatever its delta; a chain
of a million one-tuple rounds would take an hour. Here each rule variant is compiled once into
nested Python closures that probe hash indexes, so a round with a tiny delta costs microseconds.
Same rounds as fixpoint.py: the variant whose delta atom is the k-th own atom reads `recent`
there, `stable` (all but recent) before it and everything after it; expressions, comparisons
and casts are tuple_terms.py's closures (rules.py's and columnar.py's semantics).
Constant: the compiled variants, the lower relations' indexes. Changes: each own relation's
tuples, its recent delta and its indexes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

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
        for positions, idx in self.indexes.items():
            for t in new:
                idx.setdefault(tuple(t[p] for p in positions), []).append(t)


class Own(Source):
    """An own relation of the task: every tuple so far, and the last round's (`recent`)."""

    __slots__ = ("recent", "recent_set")

    def __init__(self, rows: set, recent: list) -> None:
        super().__init__(rows)
        self.recent, self.recent_set = recent, set(recent)

    def advance(self, new: list) -> None:
        """Add a round's new tuples; they are the recent delta now."""
        self.add(new)
        self.recent, self.recent_set = new, set(new)


# How an own atom of a variant reads its relation.
RECENT, STABLE, FULL, LOWER = range(4)


class Variant:
    """One rule body compiled for one delta atom: `run()` derives the round's head tuples."""

    __slots__ = ("rule", "decls", "sources", "modes", "slots", "types", "steps", "out", "visits")

    def __init__(self, rule: Rule, decls: Mapping[str, Decl], sources: Mapping[str, Source],
                 modes: Mapping[int, int], first: int) -> None:
        self.rule, self.decls, self.sources, self.modes = rule, decls, sources, modes
        self.slots: dict[str, int] = {}
        self.types: dict[str, str] = {}
        self.out: dict[str, set] = {h.relation: set() for h in rule.heads}
        self.visits = 0
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
        first_at: dict[str, int] = {}
        later = []
        for p, arg in enumerate(atom.args):
            if isinstance(arg, Const):
                value = float(arg.value) if decl.types[p] == "float" else arg.value
                keys.append((p, lambda env, v=value: v))
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
        return self._probe(atom.relation, self.modes.get(i, LOWER), tuple(p for p, _ in keys),
                           [f for _, f in keys], binds, checks, decl.arity == 0)

    def _probe(self, name, mode, positions, keyfns, binds, checks, nullary) -> Callable:
        source = self.sources[name]
        variant = self

        one = keyfns[0] if len(keyfns) == 1 else None  # the usual probe: skip a generator

        def make(nxt):
            def step(env):
                if positions:
                    key = (one(env),) if one is not None else tuple(f(env) for f in keyfns)
                if mode == RECENT:
                    rows = source.recent
                    if positions:
                        rows = [t for t in rows if tuple(t[p] for p in positions) == key]
                else:
                    if positions:
                        rows = source.index(positions).get(key, ())
                    else:
                        rows = source.rows
                    if mode == STABLE and source.recent:
                        recent = source.recent_set
                        rows = [t for t in rows if t not in recent]
                if nullary:
                    if rows:
                        nxt(env)
                    return
                variant.visits += len(rows)
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
        return _filter(lambda env: tuple(f(env) for f in fns) not in source.index(positions))

    def _compare(self, cmp: Comparison) -> Callable | None:
        known = set(self.types)
        if R.term_vars(cmp.left) | R.term_vars(cmp.right) <= known:
            (left, lt), (right, rt) = self._expr(cmp.left), self._expr(cmp.right)
            if ordered_unsigned(cmp.op, lt, rt):  # the bits read as unsigned
                ops = ClosureOps(self.slots)
                left, right = ops.order_key(left), ops.order_key(right)
            test = COMPARE[cmp.op]
            return _filter(lambda env: (lambda a, b: a is not None and b is not None
                                        and test(a, b))(left(env), right(env)))
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
        """Return the last step: each head's tuple into `out` (no value drops it)."""
        heads = []
        for head in self.rule.heads:
            decl = self.decls[head.relation]
            if decl.arity == 0:
                heads.append((self.out[head.relation], ()))
                continue
            fns = tuple(ClosureOps(self.slots).cast(self._expr(a)[0], t)
                        for a, t in zip(head.args, decl.types, strict=True))
            heads.append((self.out[head.relation], fns))

        def make(_nxt):
            def step(env):
                for out, fns in heads:
                    if not fns:
                        out.add((True,))
                        continue
                    row = tuple(f(env) for f in fns)
                    if None not in row:
                        out.add(row)
            return step
        return make

    def run(self) -> dict[str, set]:
        """Return the head tuples this variant derives in the current round."""
        for out in self.out.values():
            out.clear()
        self.steps([None] * len(self.slots))
        return self.out


def _filter(test: Callable[[Env], bool]) -> Callable:
    def make(nxt):
        def step(env):
            if test(env):
                nxt(env)
        return step
    return make


class TupleRounds:
    """A task's semi-naive rounds over Python tuples (fixpoint.py's, one tuple at a time)."""

    __slots__ = ("own", "sources", "variants")

    def __init__(self, rules, decls: Mapping[str, Decl], own: Mapping[str, Own],
                 lower: Mapping[str, list]) -> None:
        self.own = dict(own)
        self.sources: dict[str, Source] = {n: Source(rows) for n, rows in lower.items()}
        self.sources.update(self.own)
        self.variants: list[tuple[str, Variant]] = []
        for rule in rules:
            mine = [i for i, lit in enumerate(rule.body)
                    if isinstance(lit, Atom) and lit.relation in self.own]
            for k, pos in enumerate(mine):
                modes = {j: RECENT if j == pos else STABLE if j in mine[:k] else FULL
                         for j in mine}
                variant = Variant(rule, decls, self.sources, modes, pos)
                self.variants.append((rule.body[pos].relation, variant))

    def round(self) -> tuple[dict[str, list], int]:
        """Run one round; return per relation its new tuples (now recent) and tuples visited."""
        found: dict[str, set] = {n: set() for n in self.own}
        visits = 0
        for delta, variant in self.variants:
            if self.own[delta].recent:
                variant.visits = 0
                for name, rows in variant.run().items():
                    if name in found:
                        found[name] |= rows
                visits += variant.visits
        new = {}
        for name, rel in self.own.items():
            new[name] = [t for t in found[name] if t not in rel.rows]
        for name, rel in self.own.items():
            rel.advance(new[name])
        return new, visits
