"""The parser's part for terms: constants, variables, arithmetic, functors, casts, aggregates.

Functions of the parser `p` (tasks/parser.py's `expr` and `terms` call them); records and
ADT terms are record_syntax.py's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from levelflow.tasks.ast import (
    Aggregate,
    BinOp,
    Call,
    Cast,
    Comparison,
    Const,
    Record,
    Term,
    Var,
    Wildcard,
)
from levelflow.tasks.functors import CALLS, CONSTRAINTS
from levelflow.tasks.record_syntax import branch_term, record_term

if TYPE_CHECKING:
    from levelflow.tasks.parser_protocol import TokenParser as Parser

MAX_EXPR_DEPTH = 256  # a long `a + b + c ...` chain is a deep tree for every later pass
AGGREGATES = frozenset({"count", "sum", "min", "max", "mean"})
FUNCTORS = frozenset({
    "cat", "ord", "strlen", "substr", "contains", "match", "to_number", "to_string", "to_float",
    "to_unsigned", "itou", "itof", "utoi", "utof", "ftoi", "ftou", "min", "max", "range",
    "urange", "frange", "autoinc", "lnot", "bnot", "mean", "sum", "count",
})
# Binary operators by precedence, loosest first (Soufflé's parser); `^` and unary ops bind
# tighter than all of them.
BINARY_PREC = {op: level for level, ops in enumerate((
    ("lor",), ("lxor",), ("land",), ("bor",), ("bxor",), ("band",), ("bshl", "bshr", "bshru"),
    ("+", "-"), ("*", "/", "%"))) for op in ops}


def _cast(p: Parser) -> Cast:
    """Parse `as(term, Type)`."""
    start = p.take()
    p.take()  # (
    p.nest()
    term = expr(p)
    p.depth -= 1
    p.expect(",")
    ty = p.ident("a type name")
    p.expect(")")
    p.out.surface = True
    return Cast(term, ty.text, p.loc(start), p.loc(ty))


def expr(p: Parser) -> Term:
    """Parse a term."""
    return _binary(p)[0]


def _binary_prec(p: Parser) -> int | None:
    """Return the precedence of the binary operator at the cursor, or None."""
    tok = p.tok
    if tok.kind in ("punct", "ident"):
        return BINARY_PREC.get(tok.text)
    return None


def _binary(p: Parser, min_prec: int = 0) -> tuple[Term, int]:
    """Parse by precedence climbing: Soufflé's lor < lxor < land < bor < bxor < band <
    shifts < + - < * / %; all left-associative."""
    term, depth = _unary(p)
    while True:
        prec = _binary_prec(p)
        if prec is None or prec < min_prec:
            return term, depth
        op = p.take()
        right, rdepth = _binary(p, prec + 1)
        depth = max(depth, rdepth) + 1
        if depth > MAX_EXPR_DEPTH:
            raise p.error(f"expression deeper than {MAX_EXPR_DEPTH} operations", op)
        term = BinOp(op.text, term, right, p.loc(op))


def _unary(p: Parser) -> tuple[Term, int]:
    """Parse `-t`, `bnot t` or `lnot t`, or a power."""
    tok = p.tok
    if not (p.at("-") or (tok.kind == "ident" and tok.text in ("bnot", "lnot"))):
        return _power(p)
    op = p.take()
    p.nest()
    term, depth = _unary(p)
    p.depth -= 1
    if op.text != "-":
        return Call(op.text, (term,), p.loc(op)), depth + 1
    if isinstance(term, Const) and term.kind in ("number", "float"):
        # `-5` is the constant -5 (facts need constants), not the expression 0 - 5.
        return Const(-term.value, term.kind, p.loc(op)), depth
    zero = Const(0, "number", p.loc(op))
    return BinOp("-", zero, term, p.loc(op)), depth + 1


def _power(p: Parser) -> tuple[Term, int]:
    """Parse `a ^ b`: binds tighter than unary minus, right-associative (as in Soufflé)."""
    term, depth = _primary(p)
    if not p.at("^"):
        if p.tok.kind == "punct" and p.tok.text in ("**", "&", "|", "~"):
            raise p.unsupported(f"the operator '{p.tok.text}'")
        return term, depth
    op = p.take()
    p.nest()
    right, rdepth = _unary(p)
    p.depth -= 1
    depth = max(depth, rdepth) + 1
    if depth > MAX_EXPR_DEPTH:
        raise p.error(f"expression deeper than {MAX_EXPR_DEPTH} operations", op)
    return BinOp("^", term, right, p.loc(op)), depth


def _functor_call(p: Parser) -> tuple[Term, int]:
    """Parse an intrinsic functor's call `name(args...)`."""
    name = p.take()
    p.take()  # (
    args, depth = terms(p, ")")
    return Call(name.text, tuple(args), p.loc(name)), depth + 1


def terms(p: Parser, close: str) -> tuple[list[Term], int]:
    """Parse `t, ...` up to `close` (consumed): the terms and their deepest nesting."""
    p.nest()
    args: list[Term] = []
    depth = 0
    if not p.at(close):
        while True:
            arg, adepth = _binary(p)
            args.append(arg)
            depth = max(depth, adepth)
            if not p.at(","):
                break
            p.take()
    p.depth -= 1
    p.expect(close)
    return args, depth


def _aggregate(p: Parser) -> Aggregate:
    """Parse `count : { body }`, `sum e : { body }` (min, max, mean alike); the body may be
    a single atom without braces. Lowered by tasks/aggregates.py."""
    name = p.take()
    p.nest()
    target = None
    if name.text != "count":
        target = expr(p)
    p.expect(":")
    if p.at("{"):
        brace = p.take()
        bodies = p.disjunction()
        p.expect("}")
        if len(bodies) != 1:
            # Soufflé's parser refuses it too ("disjunctions in aggregation clauses are
            # currently not supported"), so a program using it is no Soufflé program.
            raise p.error("a disjunction inside an aggregate is not supported, as in Soufflé "
                          "(an auxiliary relation with a rule per disjunct does it)", brace)
        body = bodies[0]
    else:
        body = (p.atom(),)
    p.depth -= 1
    p.out.aggregates = True
    return Aggregate(name.text, target, body, p.loc(name))


def constraint(p: Parser, negated: bool) -> Comparison:
    """Parse `contains(a, b)` or `match(a, b)` (after `!` when negated) as a literal."""
    call, _ = _functor_call(p)
    if len(call.args) != 2:
        raise p.error(f"'{call.name}' takes two arguments", None)
    op = ("!" if negated else "") + call.name
    return Comparison(op, call.args[0], call.args[1], call.loc)


def _primary(p: Parser) -> tuple[Term, int]:
    tok = p.tok
    kind = tok.kind
    if kind in ("int", "uint"):
        p.take()
        if kind == "uint":
            p.out.surface = True
        return Const(tok.value, "number" if kind == "int" else "unsigned", p.loc(tok)), 0
    if kind == "float":
        p.take()
        return Const(tok.value, "float", p.loc(tok)), 0
    if kind == "string":
        p.take()
        return Const(tok.value, "symbol", p.loc(tok)), 0
    if kind == "ident":
        name = tok.text
        nxt = p.peek()
        calls = nxt.kind == "punct" and nxt.text == "("
        if name == "_":
            p.take()
            return Wildcard(p.loc(tok)), 0
        if name == "as" and calls:
            return _cast(p), 0
        if name in AGGREGATES and not calls:
            return _aggregate(p), 0
        if calls and name in CALLS:
            return _functor_call(p)
        if calls and name in CONSTRAINTS:
            raise p.error(f"'{name}(...)' is a constraint, not a value: write it as a "
                             "body literal", tok)
        if calls and name in FUNCTORS:
            raise p.unsupported(f"the functor '{name}'")
        if calls:
            raise p.error(f"'{name}(...)' cannot be used as a term (functors are not "
                             "supported)")
        if name == "nil":
            p.take()
            p.out.surface = True
            return Record((), "nil", p.loc(tok)), 0
        p.take()
        return Var(name, p.loc(tok)), 0
    if p.at("("):
        p.take()
        p.nest()
        term, depth = _binary(p)
        p.depth -= 1
        p.expect(")")
        return term, depth
    if p.at("@"):  # a user-defined functor's call (tasks/user_functors.py binds it)
        nxt = p.peek()
        if nxt.kind != "ident" or nxt.pos != tok.pos + 1:
            raise p.expected("a functor name after '@'")
        p.take()
        call, depth = _functor_call(p)
        return Call("@" + call.name, call.args, p.loc(tok)), depth
    if p.at("["):
        return record_term(p)
    if p.at("$"):
        return branch_term(p)
    raise p.expected("a term")
