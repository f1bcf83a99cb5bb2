"""The Datalog program as the parser hands it on: plain frozen records, positions kept for errors.

Primitive types are "number" (signed 32-bit in Soufflé; we use 64-bit), "unsigned", "float",
"symbol". A user type `.type T <: symbol` resolves to its primitive in `Decl.types`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import itemgetter
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from levelflow.tasks.strata import Precedence

PRIMITIVES = ("number", "unsigned", "float", "symbol")


class Loc(tuple):
    """A position in a source file (1-based line and column): (file, line, col).

    A tuple rather than a frozen dataclass: a program of 100,000 facts makes 300,000 of them,
    and a tuple is made in a third of the time. Not a NamedTuple: PySpark re-pickles those as
    classes of its own, without our methods."""

    __slots__ = ()

    def __new__(cls, file: str, line: int, col: int) -> Loc:
        return tuple.__new__(cls, (file, line, col))

    def __getnewargs__(self) -> tuple[str, int, int]:
        return tuple(self)

    file = property(itemgetter(0), doc="the file name")
    line = property(itemgetter(1), doc="the 1-based line")
    col = property(itemgetter(2), doc="the 1-based column")

    def __repr__(self) -> str:
        return f"Loc(file={self[0]!r}, line={self[1]}, col={self[2]})"

    def __str__(self) -> str:
        return f"{self[0]}:{self[1]}:{self[2]}"


@dataclass(frozen=True, slots=True)
class Var:
    """A named variable."""

    name: str
    loc: Loc | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class Wildcard:
    """The anonymous variable `_`."""

    loc: Loc | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class Const:
    """A constant; kind is "number", "float" or "symbol" (a number constant also fits unsigned)."""

    value: int | float | str
    kind: str
    loc: Loc | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class BinOp:
    """`left op right`: + - * / % ^, band bor bxor bshl bshr bshru, land lor lxor; unary minus
    is `0 - x`."""

    op: str
    left: Term
    right: Term
    loc: Loc | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class Call:
    """An intrinsic functor `name(args...)` (tasks/functors.py); `bnot x` is Call("bnot", (x,))."""

    name: str
    args: tuple[Term, ...]
    loc: Loc | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class Cast:
    """`as(term, Type)`: the term read as the user type `Type`; lowered to `term` by the checker."""

    term: Term
    type: str
    loc: Loc | None = field(default=None, compare=False)
    type_loc: Loc | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class Record:
    """A record `[a, b]` (branch ""), `nil` (branch "nil", no args) or an ADT branch
    `$Name(a, b)` (branch "$Name"); tasks/records.py lowers it to functors before checking."""

    args: tuple[Term, ...]
    branch: str = ""
    loc: Loc | None = field(default=None, compare=False)



@dataclass(frozen=True, slots=True)
class Aggregate:
    """`kind target : { body }` (kind count, sum, min, max, mean; count has no target).

    tasks/aggregates.py lowers each to a generated relation; there, the head of the rule that
    computes it carries one with an empty body: the group-by over that rule's body."""

    kind: str
    target: Term | None
    body: tuple[Literal, ...]
    loc: Loc | None = field(default=None, compare=False)



Term = Var | Wildcard | Const | BinOp | Call | Cast | Record | Aggregate


@dataclass(frozen=True, slots=True)
class Atom:
    """`relation(args...)`."""

    relation: str
    args: tuple[Term, ...]
    loc: Loc | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class Negation:
    """`!atom` in a rule body."""

    atom: Atom
    loc: Loc | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class Comparison:
    """`left op right` with op in = != < <= > >=, or the constraint functors `contains(left,
    right)` and `match(left, right)` (op "contains" / "match", "!contains" / "!match" negated)."""

    op: str
    left: Term
    right: Term
    loc: Loc | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class PathExpr:
    """A regular expression over binary relations: op in rel ^ . | + * ? (tasks/regpath.py).

    `rel` holds the relation name in `name`; `^`, `+`, `*`, `?` have one part; `.` and `|`
    have two or more (flattened).
    """

    op: str
    parts: tuple[PathExpr, ...] = ()
    name: str = ""
    loc: Loc | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class PathAtom:
    """`[EXPR](a, b)` in a rule body; replaced by ordinary atoms before checking."""

    expr: PathExpr
    args: tuple[Term, Term]
    loc: Loc | None = field(default=None, compare=False)


Literal = Atom | Negation | Comparison


@dataclass(frozen=True, slots=True)
class Rule:
    """`heads :- body.`; a fact is a rule with one ground head and an empty body."""

    heads: tuple[Atom, ...]
    body: tuple[Literal, ...]
    loc: Loc | None = field(default=None, compare=False)

    @property
    def is_fact(self) -> bool:
        """Return True for a body-less rule."""
        return not self.body

    def body_atoms(self) -> list[tuple[int, Atom, bool]]:
        """Return (position, atom, negated) for every positive or negated atom of the body."""
        if not self.body:  # a fact: most rules of a large program
            return []
        out = []
        for i, lit in enumerate(self.body):
            if isinstance(lit, Atom):
                out.append((i, lit, False))
            elif isinstance(lit, Negation):
                out.append((i, lit.atom, True))
        return out

    def reads(self) -> set[str]:
        """Return the relations the body reads, positively or negated."""
        return {atom.relation for _, atom, _ in self.body_atoms()}


@dataclass(frozen=True, slots=True)
class TypeRef:
    """A type name as written, with its position."""

    name: str
    loc: Loc


@dataclass(frozen=True, slots=True)
class RawDecl:
    """A `.decl` before its attribute types are resolved to primitives."""

    name: str
    attrs: tuple[str, ...]
    types: tuple[TypeRef, ...]
    loc: Loc
    name_loc: Loc


@dataclass(frozen=True, slots=True)
class TypeDef:
    """`.type name <: base` (kind "subtype") or `.type name = a | b` (kind "equiv"); a record
    `.type name = [f: T, ...]` (kind "record") or an ADT `.type name = A {f: T} | B {}` (kind
    "adt"): `fields` holds (branch, ((field, TypeRef), ...)) per branch, a record's branch "".
    """

    name: str
    kind: str
    bases: tuple[TypeRef, ...]
    loc: Loc
    fields: tuple = ()


# The qualifiers a `.decl` may carry after its attributes (Soufflé's; most are accepted and noted).
DECL_QUALIFIERS = frozenset({
    "brie", "btree", "btree_delete", "inline", "no_inline", "magic", "no_magic", "override",
    "overridable", "input", "output", "printsize", "eqrel", "choice",
})


@dataclass(frozen=True, slots=True)
class Decl:
    """`.decl name(attr:type, ...)` with each attribute's primitive type resolved."""

    name: str
    attrs: tuple[str, ...]
    types: tuple[str, ...]  # primitive types, one of PRIMITIVES, per attribute
    loc: Loc | None = field(default=None, compare=False)
    # Per attribute the record or ADT type it holds ("" for a plain one; () when none does),
    # and the record and ADT types they use (tasks/record_values.py reads and writes them).
    shapes: tuple[str, ...] = ()
    record_types: tuple = ()
    # `choice-domain` made while evaluating (several keys, or a recursive relation): per key
    # its attribute positions; every plan chooses per round (engine/choose.py). () when none.
    choice: tuple[tuple[int, ...], ...] = ()

    @property
    def arity(self) -> int:
        """Return the number of attributes."""
        return len(self.attrs)


@dataclass(frozen=True, slots=True)
class IO:
    """An `.input`, `.output` or `.printsize` directive with its options (filename, ...)."""

    kind: str  # "input" | "output" | "printsize" | "limitsize"
    relation: str
    options: tuple[tuple[str, str], ...] = ()
    loc: Loc | None = field(default=None, compare=False)

    def option(self, key: str, default: str | None = None) -> str | None:
        """Return the value of option `key`, or `default`."""
        return dict(self.options).get(key, default)

    @property
    def file_name(self) -> str:
        """Return the file an .input reads or an .output writes: `filename=`, or R.facts / R.csv
        (R.parquet with IO=parquet; with IO=sqlite `dbname=` or R.sqlite, as in Soufflé)."""
        suffix = "facts" if self.kind == "input" else "csv"
        if self.option("IO") in ("parquet", "sqlite"):
            suffix = self.option("IO")
        if self.option("IO") == "sqlite" and self.option("filename") is None:
            return self.option("dbname") or f"{self.relation}.{suffix}"
        return self.option("filename") or f"{self.relation}.{suffix}"


@dataclass(frozen=True, slots=True)
class Program:
    """A checked program: declarations in source order, IO directives, rules (facts included)."""

    file: str
    decls: dict[str, Decl]
    inputs: dict[str, IO]
    outputs: dict[str, IO]  # the first .output directive of each output relation
    printsize: tuple[str, ...]
    rules: tuple[Rule, ...]
    more_outputs: tuple[IO, ...] = ()  # further .output directives (Soufflé allows several)
    # Relations generated from path atoms: (name, the expression it holds), in creation order.
    paths: tuple[tuple[str, str], ...] = ()
    # Relations that are the closure `e+` of a path expression: a native operator runs them.
    closures: frozenset[str] = frozenset()
    # `.limitsize r(n=N)`: the relation keeps at most N tuples: (relation, N, where).
    limits: tuple[tuple[str, int, Loc], ...] = ()
    # One-line notes for the user: directives accepted but without effect here (pragmas, plans).
    notes: tuple[str, ...] = ()
    # The program text an incremental state stores: preprocessed, with `#line` markers (the
    # text as read when there was nothing to preprocess).
    source: str = field(default="", compare=False, repr=False)
    # The relations' precedence graph, built once by the checker (a tasks.strata.Precedence).
    precedence: Precedence | None = field(default=None, compare=False, repr=False)
    # Subsumptive rules, lowered to `@sub:r` pair rules (tasks/subsume.py): not in `rules`.
    subsumptions: tuple[Rule, ...] = ()

    @property
    def output_directives(self) -> tuple[IO, ...]:
        """Return every .output directive: the first of each relation, then the others."""
        return tuple(self.outputs.values()) + self.more_outputs

    @property
    def facts(self) -> tuple[Rule, ...]:
        """Return the body-less rules."""
        return tuple(r for r in self.rules if r.is_fact)
