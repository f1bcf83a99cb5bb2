"""User-defined functors: `.functor f(x: number, s: symbol): number` bound to the Python
function `f` of the module named by `--functors FILE.py` (Soufflé binds it to a C function).

Constant: the declarations and the module path. A call `@f(a, b)` is renamed by the checker to
`@f|number,symbol|number|/abs/FILE.py`: its signature and module travel with the rule into every
backend and Spark worker, where `function()` imports the module once per process. Both backends
call it row by row (rules.Ops), so every plan gives the same answer. `None` returned is no
value (the row derives nothing), as an overflow; a value of the wrong type, or an exception,
is one error line naming the module and the functor.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import math
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache

from levelflow.errors import LevelflowError
from levelflow.pyfile import import_file
from levelflow.tasks.ast import (
    Aggregate,
    Atom,
    BinOp,
    Call,
    Cast,
    Comparison,
    Loc,
    Negation,
    Record,
    Rule,
    Term,
    TypeRef,
)
from levelflow.tasks.numbers import held_unsigned, unsigned_value

# The module `--functors` named, for the programs the current command loads (None: none).
_MODULE: contextvars.ContextVar[str | None] = contextvars.ContextVar("functors", default=None)
INT64 = (-(2**63), 2**63 - 1)


class FunctorError(LevelflowError):
    """A user functor raised, or returned a value of the wrong type (one line)."""


@dataclass(frozen=True, slots=True)
class FunctorDecl:
    """`.functor name(types...): result [stateful]` as written."""

    name: str
    params: tuple[TypeRef, ...]
    result: TypeRef
    stateful: bool
    loc: Loc


@contextlib.contextmanager
def bound(path: str | os.PathLike[str] | None) -> Iterator[None]:
    """Within the block, programs loaded bind their `.functor`s to the module at `path`."""
    token = _MODULE.set(os.path.abspath(path) if path is not None else None)
    try:
        yield
    finally:
        _MODULE.reset(token)


def module_path() -> str | None:
    """Return the absolute path of the module bound now (None: none)."""
    return _MODULE.get()


def check_module(path: str | os.PathLike[str] | None) -> str | None:
    """Return `--functors`'s path if it names a file; else raise one line (nothing imported
    yet: a program without `.functor` never imports it)."""
    if path is not None and not os.path.isfile(path):
        raise LevelflowError(f"{path}: error: --functors: no such Python file")
    return None if path is None else os.fspath(path)


def parse_functor(p) -> FunctorDecl:
    """Parse `.functor f(x: number, symbol): number [stateful]` (parameter names optional)."""
    start = p.take()
    name = p.ident("a functor name")
    p.expect("(")
    params: list[TypeRef] = []
    while not p.at(")"):
        t = p.ident("a type name")
        if p.at(":"):  # `x: number`: the name is only documentation
            p.take()
            t = p.ident("a type name")
        params.append(TypeRef(t.text, p.loc(t)))
        if not p.at(","):
            break
        p.take()
    p.expect(")")
    p.expect(":")
    result = p.ident("a type name")
    stateful = p.tok.kind == "ident" and p.tok.text == "stateful"
    if stateful:
        p.take()
    return FunctorDecl(name.text, tuple(params), TypeRef(result.text, p.loc(result)),
                       stateful, p.loc(start))


def encode(name: str, params: tuple[str, ...], result: str, path: str) -> str:
    """Return the name a bound call carries (see the module docstring)."""
    return f"@{name}|{','.join(params)}|{result}|{path}"


def decode(encoded: str) -> tuple[str, tuple[str, ...], str, str]:
    """Return (name, parameter types, result type, module path) of a bound call's name."""
    name, params, result, path = encoded[1:].split("|", 3)
    return name, tuple(params.split(",")) if params else (), result, path


@lru_cache(maxsize=32)
def _module(path: str):
    """Return the module at `path`, imported once per process under a name of its own."""
    return import_file(path, "levelflow_functors_" + hashlib.sha1(path.encode()).hexdigest()[:12])


def load(path: str, name: str) -> Callable | None:
    """Return the function `name` of the module at `path` (None if it defines none)."""
    fn = getattr(_module(path), name, None)
    return fn if callable(fn) else None


def function(encoded: str) -> Callable:
    """Return a plain function of the row's values for a bound call: the user's function,
    its result checked against the declared type."""
    name, params, result, path = decode(encoded)
    unsigned = [i for i, t in enumerate(params) if t == "unsigned"]

    def call(*args):  # holds only strings: Spark pickles it to workers, which import anew
        fn = load(path, name)
        if unsigned:  # an unsigned argument arrives as its value, 0 .. 2^64 - 1
            args = tuple(unsigned_value(a) if i in unsigned else a for i, a in enumerate(args))
        try:
            value = fn(*args)
        except Exception as e:  # noqa: BLE001 - the user's code: any error is one line
            raise FunctorError(f"{path}: error: functor {name} raised "
                               f"{type(e).__name__}: {e}") from None
        return None if value is None else checked(value, result, name, path)
    return call


def checked(value, kind: str, name: str, path: str):
    """Return a functor's result as a value of `kind`, or raise FunctorError."""
    if kind == "symbol" and isinstance(value, str):
        return value
    if kind == "float" and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value) if math.isfinite(value) else None
    if kind in ("number", "unsigned") and isinstance(value, int) and not isinstance(value, bool):
        if kind == "unsigned":  # 0 .. 2^64 - 1, held as the int64 of its bits
            return held_unsigned(value) if 0 <= value < 2**64 else None
        return value if INT64[0] <= value <= INT64[1] else None  # out of range: an overflow
    raise FunctorError(f"{path}: error: functor {name} returned {value!r} "
                       f"({type(value).__name__}), not a {kind}")


def map_term(term: Term, f: Callable[[Term], Term]) -> Term:
    """Return the term with `f` applied to each direct subterm."""
    if isinstance(term, BinOp):
        return BinOp(term.op, f(term.left), f(term.right), term.loc)
    if isinstance(term, Call):
        return Call(term.name, tuple(map(f, term.args)), term.loc)
    if isinstance(term, Cast):
        return Cast(f(term.term), term.type, term.loc, term.type_loc)
    if isinstance(term, Record):
        return Record(tuple(map(f, term.args)), term.branch, term.loc)
    if isinstance(term, Aggregate):
        target = f(term.target) if term.target is not None else None
        return Aggregate(term.kind, target, tuple(_literal(lit, f) for lit in term.body),
                         term.loc)
    return term


def _literal(lit, f: Callable[[Term], Term]):
    if isinstance(lit, Atom):
        return Atom(lit.relation, tuple(map(f, lit.args)), lit.loc)
    if isinstance(lit, Negation):
        return Negation(_literal(lit.atom, f), lit.loc)
    if isinstance(lit, Comparison):
        return Comparison(lit.op, f(lit.left), f(lit.right), lit.loc)
    return lit


def map_rule(rule: Rule, f: Callable[[Term], Term]) -> Rule:
    """Return the rule with `f` applied to every top-level term of its heads and body."""
    heads = tuple(_literal(h, f) for h in rule.heads)
    return Rule(heads, tuple(_literal(lit, f) for lit in rule.body), rule.loc)
