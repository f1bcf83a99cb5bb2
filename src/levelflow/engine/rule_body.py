"""One Datalog rule body, whatever holds the rows: the order of joins, filters and bindings.

Constant: the rule, the declarations. Changes while a body is built: the frame so far, the
variables it binds (with their types), the comparisons and negations still waiting.
The backend's operations, terms and functors are engine/rules.py's. Inside a body every bound
variable x is the column `var_col(x)`; expression arguments of an atom are columns
`k<atom>_<pos>`, matched against the expression's value as soon as its variables are bound (by
that atom or a later one: `tak(x-1, y, ...)` may be joined before x).
"""

from __future__ import annotations

from collections.abc import Mapping

from levelflow.engine.guard import constant_values
from levelflow.engine.rules import (
    CompileError,
    Ops,
    call_args,
    literal_vars,
    term_expr,
    term_vars,
    var_col,
    where,
)
from levelflow.tasks import functors
from levelflow.tasks.ast import (
    Atom,
    BinOp,
    Call,
    Comparison,
    Const,
    Decl,
    Negation,
    Rule,
    Term,
    Var,
    Wildcard,
)


def ordered_unsigned(op: str, lt: str, rt: str) -> bool:
    """Return whether `op` orders unsigned values (< <= > >=), which compare by order_key."""
    return op not in ("=", "!=") and "unsigned" in (lt, rt) and "float" not in (lt, rt)


def compare(op: str, left, right):
    """Return the boolean expression `left op right` (Spark columns and Polars expressions)."""
    if op == "=":
        return left == right
    if op == "!=":
        return left != right
    if op == "<":
        return left < right
    if op == "<=":
        return left <= right
    if op == ">":
        return left > right
    if op == ">=":
        return left >= right
    raise ValueError(f"unknown comparison {op}")


def atom_frame(ops: Ops, df, atom: Atom, decl: Decl, bound: Mapping[str, str], tag: int = 0):
    """Return the atom's rows filtered (constants, repeats) and renamed to variable columns.

    Also returns the new variables with their types, and the expression arguments, each kept
    as a column `k<tag>_<pos>` to be matched against the expression's value.
    """
    if len(atom.args) != decl.arity:
        raise CompileError(f"{where(atom)}: error: {atom.relation} has arity {decl.arity}, "
                           f"used with {len(atom.args)} arguments")
    first: dict[str, str] = {}
    exprs: list[tuple[str, Term]] = []
    for i, arg in enumerate(atom.args):
        col = f"c{i}"
        if isinstance(arg, Const):
            df = ops.filter(df, ops.col(col) == ops.lit(arg.value, decl.types[i]))
        elif isinstance(arg, Var):
            if arg.name in first:  # `r(x, x)`: a repeated variable is an equality filter
                df = ops.filter(df, ops.col(col) == ops.col(first[arg.name]))
            else:
                first[arg.name] = col
        elif isinstance(arg, BinOp | Call):
            exprs.append((f"k{tag}_{i}", arg))
    named = [(var_col(name), ops.col(col)) for name, col in first.items()]
    named += [(k, ops.col(f"c{k.split('_')[1]}")) for k, _ in exprs]
    new = {name: decl.types[int(col[1:])] for name, col in first.items() if name not in bound}
    # Selecting no column would lose the rows' count, which a variable-free atom still needs.
    return (ops.select(df, named) if named else df), new, exprs


class Body:
    """The plan of one rule body being built: the frame so far and its bound variables."""

    __slots__ = ("ops", "rule", "decls", "frames", "df", "types", "pending", "waiting")

    def __init__(self, ops: Ops, rule: Rule, decls: Mapping[str, Decl], frames: Mapping) -> None:
        self.ops = ops
        self.rule = rule
        self.decls = decls
        self.frames = frames
        self.df = None
        self.types: dict[str, str] = {}  # bound variable -> primitive type
        self.pending = [i for i, lit in enumerate(rule.body) if not isinstance(lit, Atom)]
        # Expression arguments of joined atoms whose variables are not all bound yet:
        # (column, expression), each a filter once they are.
        self.waiting: list[tuple[str, Term]] = []

    def _expr(self, term: Term):
        return term_expr(self.ops, term, self.types)[0]

    def join_atom(self, i: int) -> None:
        """Join the positive atom at body position i into the frame."""
        ops, atom = self.ops, self.rule.body[i]
        adf, new, exprs = atom_frame(ops, self.frames[i], atom, self.decls[atom.relation],
                                     self.types, i)
        names = [var_col(a.name) for a in atom.args if isinstance(a, Var)]
        if self.df is None:
            self.types.update(new)
            self.waiting += exprs
            self.df = adf
            if names or self._waits():
                self._match_waiting()
            else:  # no variables: filter by the constant expressions, then "a tuple exists"
                # (its `k` columns kept until then: a frame of no columns has no rows' count).
                for k, t in self.waiting:
                    self.df = ops.filter(self.df, ops.col(k) == self._expr(t))
                self.df, self.waiting = ops.exists(ops.unit(), self.df, True), []
            return
        known = set(self.types)
        bound_cols = {var_col(v) for v in known}
        # Expressions over already-bound variables become computed join keys (`fib(n-1, x)`).
        keyed = [(k, t) for k, t in exprs if term_vars(t) <= known]
        cur = self.df
        if keyed:
            cur = ops.with_columns(cur, [(k, self._expr(t)) for k, t in keyed])
        on = list(dict.fromkeys(c for c in names if c in bound_cols)) + [k for k, _ in keyed]
        if on:
            cur = ops.join(cur, adf, on, i)
        elif names or len(keyed) < len(exprs):
            cur = ops.cross(cur, adf, i)
        else:  # no variables at all: the atom only says "some such tuple exists"
            cur = ops.exists(cur, adf, True)
        self.df = ops.drop(cur, [k for k, _ in keyed])
        self.types.update(new)
        # Expressions over this atom's own (or mixed) variables are filters: now, or once a
        # later atom or an equality binds what they still need.
        self.waiting += [(k, t) for k, t in exprs if not term_vars(t) <= known]
        self._match_waiting()

    def _waits(self) -> bool:
        """Return whether a waiting expression needs a variable not bound yet."""
        return any(not term_vars(t) <= set(self.types) for _, t in self.waiting)

    def _match_waiting(self) -> bool:
        """Filter by each waiting expression whose variables are now bound; return whether any."""
        known = set(self.types)
        ready = [(k, t) for k, t in self.waiting if term_vars(t) <= known]
        for k, t in ready:
            self.df = self.ops.filter(self.df, self.ops.col(k) == self._expr(t))
        if ready:
            done = [k for k, _ in ready]
            self.df = self.ops.drop(self.df, done)
            self.waiting = [(k, t) for k, t in self.waiting if k not in done]
        return bool(ready)

    def anti_join(self, i: int) -> None:
        """Remove from the frame the rows that the negated atom at body position i matches."""
        ops, atom = self.ops, self.rule.body[i].atom
        adf, _, exprs = atom_frame(ops, self.frames[i], atom, self.decls[atom.relation],
                                   self.types, i)
        cur = self.df
        if exprs:
            cur = ops.with_columns(cur, [(k, self._expr(t)) for k, t in exprs])
        on = [var_col(a.name) for a in atom.args if isinstance(a, Var)] + [k for k, _ in exprs]
        on = list(dict.fromkeys(on))
        cur = ops.anti(cur, adf, on) if on else ops.exists(cur, adf, False)
        self.df = ops.drop(cur, [k for k, _ in exprs])

    def apply_ready(self) -> None:
        """Apply every comparison or negation whose variables are bound; bind `x = expr`."""
        if self.df is None:  # nothing to filter yet: the first atom comes first
            return
        progress = True
        while progress:
            progress = self._match_waiting()
            for i in list(self.pending):
                lit = self.rule.body[i]
                if isinstance(lit, Negation):
                    if literal_vars(lit) <= set(self.types):
                        self.anti_join(i)
                        self.pending.remove(i)
                        progress = True
                elif self._comparison(lit):
                    self.pending.remove(i)
                    progress = True

    def _comparison(self, cmp: Comparison) -> bool:
        """Filter or bind by a comparison if its variables allow; return whether it was used."""
        known = set(self.types)
        for var, expr in ((cmp.left, cmp.right), (cmp.right, cmp.left)):
            if (isinstance(expr, Call) and expr.name == "range" and cmp.op == "="
                    and isinstance(var, Var) and term_vars(expr) <= known):
                self._generate(var, expr)
                return True
        if term_vars(cmp.left) | term_vars(cmp.right) <= known:
            (left, lt), (right, rt) = (term_expr(self.ops, t, self.types)
                                       for t in (cmp.left, cmp.right))
            if cmp.op.lstrip("!") in functors.CONSTRAINTS:
                cond = self.ops.test(cmp.op.lstrip("!"), left, right)
                cond = ~cond if cmp.op.startswith("!") else cond
            else:
                if ordered_unsigned(cmp.op, lt, rt):
                    left, right = self.ops.order_key(left), self.ops.order_key(right)
                cond = compare(cmp.op, left, right)
            self.df = self.ops.filter(self.df, cond)
            return True
        if cmp.op != "=":
            return False
        for var, expr in ((cmp.left, cmp.right), (cmp.right, cmp.left)):
            if isinstance(var, Var) and var.name not in known and term_vars(expr) <= known:
                value, kind = term_expr(self.ops, expr, self.types)
                name = var_col(var.name)
                self.df = self.ops.not_null(self.ops.with_columns(self.df, [(name, value)]),
                                            [name])
                self.types[var.name] = kind
                return True
        return False

    def _generate(self, var: Var, call: Call) -> None:
        """Bind `var = range(...)`: a row per value; a bound var keeps the rows it is among.
        Under a limit, the values are counted first (over constants without a job)."""
        exprs, _, kind = call_args(self.ops, call, self.types)
        if self.ops.limit is not None:
            values = constant_values(call)
            self.ops.limit.check_range(values if values is not None else
                                       self.ops.values(self.df, exprs, kind), call.loc)
        name = var_col(var.name)
        if var.name not in self.types:
            self.df = self.ops.generate(self.df, name, exprs, kind)
            self.types[var.name] = kind
            return
        self.df = self.ops.generate(self.df, "_gen", exprs, kind)
        self.df = self.ops.drop(self.ops.filter(self.df, self.ops.col(name) ==
                                                self.ops.col("_gen")), ["_gen"])

    def next_atom(self, todo: list[int], first: int | None) -> int:
        """Return the body position of the atom to join next.

        Any atom can be joined: an expression argument whose variables are not bound yet waits
        as a filter. So the order only weighs cost: the recent delta first, then atoms that
        share a bound argument, atoms whose expressions can be matched now, the smaller.
        """
        known = set(self.types)
        best, best_key = todo[0], None
        for i in todo:
            atom = self.rule.body[i]
            own = {a.name for a in atom.args if isinstance(a, Var)}
            ready = all(term_vars(a) <= known | own for a in atom.args
                        if isinstance(a, BinOp | Call))
            bound_args = sum(1 for a in atom.args if isinstance(a, Const)
                             or (not isinstance(a, Wildcard) and term_vars(a) and
                                 term_vars(a) <= known))
            connected = self.df is None or bound_args > 0 or not own
            key = (i == first, connected, ready, bound_args, -self.ops.size(i), -i)
            if best_key is None or key > best_key:
                best, best_key = i, key
        return best


def body_rows(ops: Ops, rule: Rule, decls: Mapping[str, Decl], frames: Mapping,
              first: int | None = None) -> tuple[object, dict[str, str]]:
    """Return the rule body's rows (a column per bound variable) and the variable types.

    `frames` maps the body position of every atom (positive or negated) to the frame it reads;
    `first` is the atom to start from (the recent delta of a semi-naive variant).
    """
    body = Body(ops, rule, decls, frames)
    todo = [i for i, lit in enumerate(rule.body) if isinstance(lit, Atom)]
    if not todo:
        body.df = ops.unit()
    body.apply_ready()
    while todo:
        i = body.next_atom(todo, first)
        todo.remove(i)
        body.join_atom(i)
        body.apply_ready()
    if body.waiting:
        term = body.waiting[0][1]
        missing = sorted(term_vars(term) - set(body.types))
        raise CompileError(f"{where(term)}: error: variable {missing[0]} is not grounded")
    if body.pending:
        lit = rule.body[body.pending[0]]
        missing = sorted(literal_vars(lit) - set(body.types))
        what = f"variable {missing[0]}" if missing else "a variable"
        raise CompileError(f"{where(lit)}: error: {what} is not grounded")
    return body.df, body.types
