"""Symbols as int64 codes inside a worker: joins, dedup and packed keys then run on integers.

The dictionary is the sorted set of every symbol of the inputs, facts and rule constants, so a
code compares as its symbol does (byte order, as Spark and Soufflé compare). The rules and
declarations are rewritten once: symbol constants become their codes, symbol attributes numbers.
That needs a dictionary complete for the whole fixpoint, so a task whose rules read or make text
(`cat`, `substr`, `to_string`, `match`, ...: new symbols each round) keeps its symbols as
strings: its dictionary is None and encoding leaves everything as it is.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

import polars as pl

from levelflow.tasks.ast import Atom, BinOp, Call, Comparison, Const, Decl, Negation, Rule

# Functors that read or make symbols' text (min and max may compare symbols).
TEXT_FUNCTORS = frozenset({"cat", "strlen", "substr", "to_string", "to_number", "to_unsigned",
                           "to_float", "min", "max"})


def _reads_text(term) -> bool:
    if isinstance(term, Call):
        return (term.name in TEXT_FUNCTORS or term.name.startswith(("#", "@"))  # records, @user
                or any(map(_reads_text, term.args)))
    if isinstance(term, BinOp):
        return _reads_text(term.left) or _reads_text(term.right)
    return False


def needs_text(rules: Iterable[Rule]) -> bool:
    """Return whether rules read or make symbols' text, so their symbols stay strings."""
    for rule in rules:
        for lit in (*rule.heads, *rule.body):
            atom = lit.atom if isinstance(lit, Negation) else lit
            if isinstance(atom, Atom):
                terms = atom.args
            else:
                if lit.op.lstrip("!") in ("contains", "match"):
                    return True
                terms = (lit.left, lit.right)
            if any(map(_reads_text, terms)):
                return True
    return False


def _symbol_consts(rules: Iterable[Rule]) -> set[str]:
    """Return the symbol constants written in the rules."""
    found: set[str] = set()

    def visit(term) -> None:
        if isinstance(term, Const) and term.kind == "symbol":
            found.add(term.value)
        elif isinstance(term, BinOp):
            visit(term.left)
            visit(term.right)

    for rule in rules:
        for lit in (*rule.heads, *rule.body):
            atom = lit.atom if isinstance(lit, Negation) else lit
            if isinstance(atom, Atom):
                for arg in atom.args:
                    visit(arg)
            elif isinstance(lit, Comparison):
                visit(lit.left)
                visit(lit.right)
    return found


def symbol_columns(decl: Decl) -> list[str]:
    """Return the columns of a relation that hold symbols."""
    return [f"c{i}" for i, t in enumerate(decl.types) if t == "symbol"]


def dictionary(frames: Iterable[tuple[Decl, pl.DataFrame]], rules) -> pl.Series | None:
    """Return the sorted distinct symbols of the frames' symbol columns and the rules (None
    when the rules need the text: nothing is encoded)."""
    rules = tuple(rules)
    if needs_text(rules):
        return None
    parts = [pl.Series("s", sorted(_symbol_consts(rules)), dtype=pl.String)]
    for decl, df in frames:
        parts += [df[c].rename("s") for c in symbol_columns(decl)]
    return pl.concat(parts).unique().sort()


def encode(df: pl.DataFrame, decl: Decl, symbols: pl.Series | None) -> pl.DataFrame:
    """Return the frame with its symbol columns replaced by their codes."""
    cols = symbol_columns(decl)
    if not cols or symbols is None:
        return df
    return df.with_columns([pl.Series(c, symbols.search_sorted(df[c]), dtype=pl.Int64)
                            for c in cols])


def decode(df: pl.DataFrame, decl: Decl, symbols: pl.Series | None) -> pl.DataFrame:
    """Return the frame with its symbol codes replaced by the symbols."""
    cols = symbol_columns(decl)
    if not cols or symbols is None:
        return df
    return df.with_columns([symbols.gather(df[c]).alias(c) for c in cols])


def encoded_program(rules: Iterable[Rule], decls: Mapping[str, Decl],
                    symbols: pl.Series | None) -> tuple[tuple[Rule, ...], dict[str, Decl]]:
    """Return the rules and declarations as a fixpoint over `symbols`' codes sees them."""
    if symbols is None:
        return tuple(rules), dict(decls)
    codes = {s: i for i, s in enumerate(symbols.to_list())}
    return (tuple(encode_rule(r, codes) for r in rules),
            {n: encode_decl(d) for n, d in decls.items()})


def encode_decl(decl: Decl) -> Decl:
    """Return the declaration with symbol attributes as numbers (their codes)."""
    types = tuple("number" if t == "symbol" else t for t in decl.types)
    return dataclasses.replace(decl, types=types)


def encode_rule(rule: Rule, codes: Mapping[str, int]) -> Rule:
    """Return the rule with each symbol constant replaced by its code."""
    def term(t):
        if isinstance(t, Const) and t.kind == "symbol":
            return dataclasses.replace(t, value=codes[t.value], kind="number")
        return t

    def literal(lit):
        if isinstance(lit, Atom):
            return dataclasses.replace(lit, args=tuple(term(a) for a in lit.args))
        if isinstance(lit, Negation):
            return dataclasses.replace(lit, atom=literal(lit.atom))
        if isinstance(lit, Comparison):
            return dataclasses.replace(lit, left=term(lit.left), right=term(lit.right))
        return lit

    return dataclasses.replace(rule, heads=tuple(literal(h) for h in rule.heads),
                               body=tuple(literal(b) for b in rule.body))
