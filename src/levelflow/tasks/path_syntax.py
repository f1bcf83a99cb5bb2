"""The parser's part for path atoms: `[EXPR](a, b)` (tasks/regpath.py expands them).

Functions of the parser `p` (tasks/parser.py calls `path_atom` for a body literal).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from levelflow.tasks.ast import PathAtom, PathExpr
from levelflow.tasks.lexer import Token

if TYPE_CHECKING:
    from levelflow.tasks.parser_protocol import TokenParser as Parser

# `^` and `(` inside one path atom: its expansion (tasks/regpath.py) recurses about six calls a
# level, so this keeps the deepest expression well inside Python's recursion limit.
MAX_PATH_NESTING = 50


def path_atom(p: Parser) -> PathAtom:
    """Parse a path atom `[EXPR](source, target)`."""
    start = p.take()
    p.path_top = p.depth
    expr = path_alt(p)
    if not p.at("]"):
        raise p.expected("'.', '|', '+', '*', '?' or ']' in a path expression")
    p.take()
    p.expect("(")
    args = [p.expr()]
    while p.at(","):
        p.take()
        args.append(p.expr())
    if len(args) != 2 or not p.at(")"):
        raise p.error("a path atom takes two arguments: [EXPR](source, target)")
    p.take()
    return PathAtom(expr, (args[0], args[1]), p.loc(start))


def path_alt(p: Parser) -> PathExpr:
    """Parse `e | e ...` (the loosest path operator)."""
    first = p.tok
    parts = [path_seq(p)]
    while p.at("|"):
        p.take()
        parts.append(path_seq(p))
    return parts[0] if len(parts) == 1 else PathExpr("|", tuple(parts), loc=p.loc(first))


def path_seq(p: Parser) -> PathExpr:
    """Parse `e . e ...` (a path expression's sequence)."""
    first = p.tok
    parts = [path_unary(p)]
    while p.at(".") or p.tok.kind == "directive":
        if p.tok.kind == "directive":  # `a.type`: the lexer took `.type` for a directive
            tok = p.take()
            parts.append(path_postfix(p, PathExpr("rel", name=tok.value,
                                                    loc=p.source.loc(tok.pos + 1))))
            continue
        p.take()
        parts.append(path_unary(p))
    return parts[0] if len(parts) == 1 else PathExpr(".", tuple(parts), loc=p.loc(first))


def path_unary(p: Parser) -> PathExpr:
    """Parse `^e`, `(e)` or a relation name, with its postfix operators."""
    tok = p.tok
    p.nest()
    if p.depth - p.path_top > MAX_PATH_NESTING:
        raise p.error(f"path expression nested deeper than {MAX_PATH_NESTING} levels")
    if p.at("^"):
        p.take()
        expr = PathExpr("^", (path_unary(p),), loc=p.loc(tok))
    elif p.at("("):
        p.take()
        inner = path_alt(p)
        p.expect(")")
        expr = path_postfix(p, inner)
    elif tok.kind == "ident" and tok.text.rstrip("?"):
        p.take()
        # `knows?` is one identifier to the lexer (Soufflé names may hold '?').
        name = tok.text.rstrip("?")
        expr = PathExpr("rel", name=name, loc=p.loc(tok))
        expr = path_postfix(p, expr, tok.text[len(name):], tok)
    else:
        raise p.expected("a relation name, '^' or '(' in a path expression")
    p.depth -= 1
    return expr


def path_postfix(p: Parser, expr: PathExpr, ops: str = "", first: Token | None = None) -> PathExpr:
    """Return `expr` under the postfix operators (+ * ?) at the cursor."""
    # A run of postfix operators is one operator (e++ = e+, e?? = e?, any mix = e*), so a
    # long run cannot make the expression deeper than the nesting the parser bounds.
    while True:
        tok = p.tok
        if tok.kind == "punct" and tok.text in ("+", "*", "**"):
            ops += tok.text
        elif tok.kind == "ident" and not tok.text.strip("?"):
            ops += tok.text
        else:
            break
        first = first or tok
        p.take()
    if not ops:
        return expr
    op = ops[0] if len(set(ops)) == 1 else "*"
    return PathExpr(op, (expr,), loc=p.loc(first))
