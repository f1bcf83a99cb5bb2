"""One Datalog rule as a DataFrame plan: body -> joins, filters, anti joins; heads -> selects.

Inside a body plan every bound variable x is the column `var_col(x)` (`v_x`, unique regardless
of case); a relation's columns stay positional (c0..) until an atom renames them, so self-joins
never see ambiguous names.
Arithmetic follows Soufflé on 64-bit integers: `/` truncates and `%` takes the dividend's sign
(C). Spark 4 runs in ANSI mode, where overflow and division by zero raise; here they yield NULL
instead and the row is dropped (Soufflé leaves both undefined). `unsigned` values are the
non-negative 64-bit integers: an unsigned result below zero, where Soufflé would wrap around, is
an overflow too, so unsigned columns never hold a negative value and compare as unsigned. Float
arithmetic is on doubles.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from levelflow.engine.types import SQL_TYPES
from levelflow.errors import LevelflowError
from levelflow.tasks.ast import (
    Atom,
    BinOp,
    Comparison,
    Const,
    Decl,
    Negation,
    Rule,
    Term,
    Var,
    Wildcard,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

# Known-small relations are broadcast to the join instead of shuffling the (bigger) left side.
BROADCAST_ROWS = 20_000
# Row estimate for a relation whose size is unknown: it sorts after every known one.
_UNKNOWN_ROWS = 1 << 62


class CompileError(LevelflowError):
    """A rule cannot be evaluated (an ungrounded variable, a non-stratified negation, ...)."""


def _where(node: object) -> str:
    """Return the `file:line:col` prefix of a node, or `rule` when it carries no position."""
    loc = getattr(node, "loc", None)
    return str(loc) if loc is not None else "rule"


def term_vars(term: Term) -> set[str]:
    """Return the names of the variables in a term."""
    if isinstance(term, Var):
        return {term.name}
    if isinstance(term, BinOp):
        return term_vars(term.left) | term_vars(term.right)
    return set()


def c_div(a: int, b: int) -> int:
    """Return a / b truncated toward zero, as C does."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def c_mod(a: int, b: int) -> int:
    """Return a % b with the sign of the dividend, as C does."""
    return a - b * c_div(a, b)


def ground_value(term: Term) -> int | float | str:
    """Return the value of a variable-free term (a fact argument); raise CompileError otherwise."""
    if isinstance(term, Const):
        return term.value
    if isinstance(term, BinOp):
        a, b = ground_value(term.left), ground_value(term.right)
        if isinstance(a, str) or isinstance(b, str):
            raise CompileError(f"{_where(term)}: error: arithmetic on a symbol")
        if term.op == "+":
            return a + b
        if term.op == "-":
            return a - b
        if term.op == "*":
            return a * b
        if b == 0:
            raise CompileError(f"{_where(term)}: error: division by zero in a fact")
        if isinstance(a, float) or isinstance(b, float):
            return a / b if term.op == "/" else a - b * int(a / b)
        return c_div(a, b) if term.op == "/" else c_mod(a, b)
    raise CompileError(f"{_where(term)}: error: a fact must be ground")


def _lit(value: int | float | str, kind: str) -> Column:
    """Return a literal column of the Spark type that stores `kind`."""
    import pyspark.sql.functions as F

    return F.lit(value).cast(SQL_TYPES.get(kind, "bigint"))


def var_col(name: str) -> str:
    """Return the column name of variable `name`: `v_` and the name, unique regardless of case.

    Spark resolves column names without case by default, so `i` and `I` in one rule would be
    ambiguous; `_` becomes `__` and an upper-case letter `_` plus its lower case (`I` -> `v__i`).
    """
    return "v_" + "".join("__" if ch == "_" else f"_{ch.lower()}" if ch.isupper() else ch
                          for ch in name)


def term_column(term: Term, types: Mapping[str, str]) -> tuple[Column, str]:
    """Return a term as a column over `v_*` columns and its primitive type (float wins)."""
    import pyspark.sql.functions as F

    if isinstance(term, Var):
        if term.name not in types:
            raise CompileError(f"{_where(term)}: error: variable {term.name} is not grounded")
        return F.col(var_col(term.name)), types[term.name]
    if isinstance(term, Const):
        return _lit(term.value, term.kind), term.kind
    if isinstance(term, Wildcard):
        raise CompileError(f"{_where(term)}: error: a wildcard has no value here")
    left, lt = term_column(term.left, types)
    right, rt = term_column(term.right, types)
    if "symbol" in (lt, rt):
        raise CompileError(f"{_where(term)}: error: arithmetic on a symbol")
    # An integer literal takes the other operand's type, as Soufflé infers it: `x - 1` with x
    # unsigned is unsigned arithmetic.
    if isinstance(term.left, Const) and lt == "number" and rt == "unsigned":
        lt = "unsigned"
    if isinstance(term.right, Const) and rt == "number" and lt == "unsigned":
        rt = "unsigned"
    kind = "float" if "float" in (lt, rt) else ("unsigned" if lt == rt == "unsigned" else "number")
    value = _arith(term, left, right, kind)
    if kind == "unsigned":
        value = F.when(value >= 0, value)  # below zero: an overflow, the row is dropped
    return value, kind


def _arith(term: BinOp, left: Column, right: Column, kind: str) -> Column:
    """Return `left op right`, NULL where it overflows or divides by zero."""
    import pyspark.sql.functions as F

    op = term.op
    if op == "+":
        return F.try_add(left, right)
    if op == "-":
        return F.try_subtract(left, right)
    if op == "*":
        return F.try_multiply(left, right)
    if op == "/":
        if kind == "float":
            return F.when(right != 0, left / right)
        # `div` is Spark's integral division (truncating, like C); guarded against zero.
        return F.when(right != 0, F.call_function("div", left, right))
    if op == "%":
        return F.try_mod(left, right)
    raise CompileError(f"{_where(term)}: error: unknown operator {op}")


def _compare(op: str, left: Column, right: Column) -> Column:
    """Return the boolean column `left op right`."""
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


def _atom_frame(df: DataFrame, atom: Atom, decl: Decl, bound: Mapping[str, str]
                ) -> tuple[DataFrame, dict[str, str], list[tuple[str, Term]]]:
    """Return the atom's relation filtered (constants, repeats) and renamed to `v_*` columns.

    Also returns the new variables with their types, and the arguments that are expressions,
    each kept as a column `k_<pos>` to be matched against the expression's value.
    """
    import pyspark.sql.functions as F

    if len(atom.args) != decl.arity:
        raise CompileError(f"{_where(atom)}: error: {atom.relation} has arity {decl.arity}, "
                           f"used with {len(atom.args)} arguments")
    conds = []
    first: dict[str, str] = {}
    exprs: list[tuple[str, Term]] = []
    for i, arg in enumerate(atom.args):
        col = f"c{i}"
        if isinstance(arg, Const):
            conds.append(F.col(col) == _lit(arg.value, decl.types[i]))
        elif isinstance(arg, Var):
            if arg.name in first:  # `r(x, x)`: a repeated variable is an equality filter
                conds.append(F.col(col) == F.col(first[arg.name]))
            else:
                first[arg.name] = col
        elif isinstance(arg, BinOp):
            exprs.append((f"k_{i}", arg))
    for cond in conds:
        df = df.filter(cond)
    cols = [F.col(col).alias(var_col(name)) for name, col in first.items()]
    cols += [F.col(f"c{name[2:]}").alias(name) for name, _ in exprs]
    new = {name: decl.types[int(col[1:])] for name, col in first.items() if name not in bound}
    return (df.select(*cols) if cols else df), new, exprs


class _Body:
    """The plan of one rule body being built: the frame so far and its bound variables."""

    def __init__(self, spark: SparkSession, rule: Rule, decls: Mapping[str, Decl],
                 frames: Mapping[int, DataFrame], counts: Mapping[int, int],
                 small_seed: bool = False) -> None:
        self.spark = spark
        self.small_seed = small_seed  # the first atom is a few rows: ship them to a big atom
        self.rule = rule
        self.decls = decls
        self.frames = frames
        self.counts = counts
        self.df: DataFrame | None = None
        self.types: dict[str, str] = {}  # bound variable -> primitive type
        self.pending = [i for i, lit in enumerate(rule.body) if not isinstance(lit, Atom)]

    def unit(self) -> DataFrame:
        """Return the one-row frame that stands for the empty conjunction."""
        import pyspark.sql.functions as F

        return self.spark.range(1).select(F.lit(True).alias("_unit"))

    def join_atom(self, i: int) -> None:
        """Join the positive atom at body position i into the frame."""
        import pyspark.sql.functions as F

        atom = self.rule.body[i]
        adf, new, exprs = _atom_frame(self.frames[i], atom, self.decls[atom.relation], self.types)
        names = [c for c in adf.columns if c.startswith("v_")]
        if self.df is None:
            self.types.update(new)
            for k, t in exprs:  # only this atom's variables or constants: a filter
                adf = adf.filter(F.col(k) == term_column(t, self.types)[0])
            self.df = adf.drop(*[k for k, _ in exprs]) if names else \
                self.unit().join(adf, how="left_semi")
            return
        known = set(self.types)
        # Expressions over already-bound variables become computed join keys (`fib(n-1, x)`).
        keyed = [(k, t) for k, t in exprs if term_vars(t) <= known]
        later = [(k, t) for k, t in exprs if not term_vars(t) <= known]
        cur = self.df
        for k, t in keyed:
            cur = cur.withColumn(k, term_column(t, self.types)[0])
        if self.counts.get(i, _UNKNOWN_ROWS) <= BROADCAST_ROWS:
            adf = F.broadcast(adf)
        elif self.small_seed:
            # Only the first big atom: after it the rows joined so far may be many.
            self.small_seed = False
            cur = F.broadcast(cur)
        bound_cols = {var_col(v) for v in known}
        on = [c for c in names if c in bound_cols] + [k for k, _ in keyed]
        if on:
            cur = cur.join(adf, on=on, how="inner")
        elif names or later:
            cur = cur.crossJoin(adf)
        else:  # no variables at all: the atom only says "some such tuple exists"
            cur = cur.join(adf, how="left_semi")
        self.types.update(new)
        for k, t in later:  # expressions over this atom's own (or mixed) variables: a filter
            cur = cur.filter(F.col(k) == term_column(t, self.types)[0])
        self.df = cur.drop(*[k for k, _ in exprs])

    def anti_join(self, i: int) -> None:
        """Remove from the frame the rows that the negated atom at body position i matches."""
        atom = self.rule.body[i].atom
        adf, _, exprs = _atom_frame(self.frames[i], atom, self.decls[atom.relation], self.types)
        cur = self.df
        for k, t in exprs:
            cur = cur.withColumn(k, term_column(t, self.types)[0])
        on = [c for c in adf.columns if c.startswith(("v_", "k_"))]
        if on:
            cur = cur.join(adf, on=on, how="left_anti")
        else:  # a negated atom without variables: "no such tuple exists"
            cur = cur.join(adf, how="left_anti")
        self.df = cur.drop(*[k for k, _ in exprs])

    def apply_ready(self) -> None:
        """Apply every comparison or negation whose variables are bound; bind `x = expr`."""
        if self.df is None:  # nothing to filter yet: the first atom comes first
            return
        progress = True
        while progress:
            progress = False
            for i in list(self.pending):
                lit = self.rule.body[i]
                if isinstance(lit, Negation):
                    if _literal_vars(lit) <= set(self.types):
                        self.anti_join(i)
                        self.pending.remove(i)
                        progress = True
                    continue
                if self._comparison(lit):
                    self.pending.remove(i)
                    progress = True

    def _comparison(self, cmp: Comparison) -> bool:
        """Filter or bind by a comparison if its variables allow; return whether it was used."""
        import pyspark.sql.functions as F

        known = set(self.types)
        lv, rv = term_vars(cmp.left), term_vars(cmp.right)
        if lv | rv <= known:
            left, _ = term_column(cmp.left, self.types)
            right, _ = term_column(cmp.right, self.types)
            self.df = self.df.filter(_compare(cmp.op, left, right))
            return True
        if cmp.op != "=":
            return False
        for var, expr in ((cmp.left, cmp.right), (cmp.right, cmp.left)):
            if isinstance(var, Var) and var.name not in known and term_vars(expr) <= known:
                col, kind = term_column(expr, self.types)
                self.df = self.df.withColumn(var_col(var.name), col).filter(
                    F.col(var_col(var.name)).isNotNull())
                self.types[var.name] = kind
                return True
        return False

    def next_atom(self, todo: list[int], first: int | None) -> int | None:
        """Return the body position of the atom to join next, or None if none can be joined."""
        known = set(self.types)
        best, best_key = None, None
        for i in todo:
            atom = self.rule.body[i]
            own = {a.name for a in atom.args if isinstance(a, Var)}
            if any(not term_vars(a) <= known | own for a in atom.args if isinstance(a, BinOp)):
                continue  # an expression argument waits for its variables
            bound_args = sum(1 for a in atom.args if isinstance(a, Const)
                             or (not isinstance(a, Wildcard) and term_vars(a) and
                                 term_vars(a) <= known))
            connected = self.df is None or bound_args > 0 or not own
            key = (i == first, connected, bound_args, -self.counts.get(i, _UNKNOWN_ROWS), -i)
            if best_key is None or key > best_key:
                best, best_key = i, key
        return best


def body_frame(spark: SparkSession, rule: Rule, decls: Mapping[str, Decl],
               frames: Mapping[int, DataFrame], counts: Mapping[int, int] | None = None,
               first: int | None = None,
               small_seed: bool = False) -> tuple[DataFrame, dict[str, str]]:
    """Return the rule body's plan (one `v_x` column per bound variable) and the variable types.

    `frames` maps the body position of every atom (positive or negated) to the DataFrame it
    reads; `counts` maps positions to known row counts; `first` is the atom to start from
    (the recent delta of a semi-naive variant); `small_seed` says that atom has few rows, so the
    rows joined so far are broadcast to the first big atom instead of shuffling it.
    """
    body = _Body(spark, rule, decls, frames, counts or {}, small_seed)
    todo = [i for i, lit in enumerate(rule.body) if isinstance(lit, Atom)]
    if not todo:
        body.df = body.unit()
    body.apply_ready()
    while todo:
        i = body.next_atom(todo, first)
        if i is None:
            lit = rule.body[todo[0]]
            raise CompileError(f"{_where(lit)}: error: an argument of {lit.relation} is not "
                               f"grounded")
        todo.remove(i)
        body.join_atom(i)
        body.apply_ready()
    if body.pending:
        lit = rule.body[body.pending[0]]
        missing = sorted(_literal_vars(lit) - set(body.types))
        what = f"variable {missing[0]}" if missing else "a variable"
        raise CompileError(f"{_where(lit)}: error: {what} is not grounded")
    return body.df, body.types


def _literal_vars(lit: object) -> set[str]:
    """Return the variables of a body literal."""
    if isinstance(lit, Atom):
        return set().union(*map(term_vars, lit.args))
    if isinstance(lit, Negation):
        return _literal_vars(lit.atom)
    return term_vars(lit.left) | term_vars(lit.right)


def head_frame(body: DataFrame, types: Mapping[str, str], head: Atom, decl: Decl) -> DataFrame:
    """Return the head's tuples (c0.. cast to the declared types) from a body plan; may repeat."""
    import pyspark.sql.functions as F

    if len(head.args) != decl.arity:
        raise CompileError(f"{_where(head)}: error: {head.relation} has arity {decl.arity}, "
                           f"used with {len(head.args)} arguments")
    if decl.arity == 0:
        return body.select(F.lit(True).alias("c0")).limit(1)
    cols, computed = [], []
    for i, (arg, primitive) in enumerate(zip(head.args, decl.types, strict=True)):
        if isinstance(arg, Wildcard):
            raise CompileError(f"{_where(head)}: error: a wildcard in the head of a rule")
        col, _ = term_column(arg, types)
        cols.append(col.cast(SQL_TYPES[primitive]).alias(f"c{i}"))
        if isinstance(arg, BinOp):
            computed.append(f"c{i}")
    out = body.select(*cols)
    for c in computed:  # NULL marks an overflow or a division by zero: drop the row
        out = out.filter(F.col(c).isNotNull())
    return out


def rule_heads(rule: Rule, relations: Sequence[str]) -> list[Atom]:
    """Return the heads of a rule that derive into one of `relations`."""
    return [h for h in rule.heads if h.relation in relations]
