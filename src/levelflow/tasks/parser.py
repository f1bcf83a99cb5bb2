"""Recursive-descent parser from tokens to unchecked declarations, directives and rules.

Constant: the token list. Changes: the cursor `i` and the nesting depth (bounded, so no input
can exhaust Python's stack). Disjunctions `;` in rule bodies are expanded here into one rule per
alternative (disjunctive normal form), so the AST only ever holds conjunctive bodies.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from levelflow.tasks.ast import (
    DECL_QUALIFIERS,
    IO,
    Aggregate,
    Atom,
    BinOp,
    Call,
    Cast,
    Comparison,
    Const,
    Literal,
    Loc,
    Negation,
    PathAtom,
    PathExpr,
    RawDecl,
    Record,
    Rule,
    Term,
    TypeDef,
    TypeRef,
    Var,
    Wildcard,
)
from levelflow.tasks.choice import parse_choice
from levelflow.tasks.comp_check import check_components
from levelflow.tasks.components import (
    Comp,
    Init,
    comp_def,
    init_def,
    instantiate,
    merge_qualified,
    override,
)
from levelflow.tasks.directives import parse_plan, parse_pragma
from levelflow.tasks.errors import DatalogError
from levelflow.tasks.functors import CALLS, CONSTRAINTS
from levelflow.tasks.lexer import Source, Token, simple_fact, tokenize
from levelflow.tasks.lower import MAX_DNF, negate_dnf
from levelflow.tasks.record_syntax import adt_type, branch_term, record_term, record_type
from levelflow.tasks.subsume import parse_subsumption
from levelflow.tasks.user_functors import parse_functor

MAX_NESTING = 100  # parentheses, unary minus and body groups
MAX_EXPR_DEPTH = 256  # a long `a + b + c ...` chain is a deep tree for every later pass
# `^` and `(` inside one path atom: its expansion (tasks/regpath.py) recurses about six calls a
# level, so this keeps the deepest expression well inside Python's recursion limit.
MAX_PATH_NESTING = 50

COMPARISONS = frozenset({"=", "!=", "<", "<=", ">", ">="})
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
UNSUPPORTED_FUNCTORS = {
    "ord": " (Soufflé numbers symbols in the order its symbol table met them; levelflow's "
           "evaluation has no such order)",
}
UNSUPPORTED_DIRECTIVES = {
    "include": " without the preprocessor (--no-preprocessor)",
    "once": " without the preprocessor (--no-preprocessor)",
    "lattice": " (lattices)",
}


@dataclass(slots=True)
class Parsed:
    """Everything a file declares, in source order, not yet checked."""

    decls: list[RawDecl] = field(default_factory=list)
    types: list[TypeDef] = field(default_factory=list)
    ios: list[IO] = field(default_factory=list)
    rules: list[Rule] = field(default_factory=list)
    # The syntax error that stopped parsing; the lists then hold the statements before it.
    error: DatalogError | None = None
    # `.pragma "key" "value"` (value "" when absent) and `.plan` clauses, with where they are.
    pragmas: list[tuple[str, str, Loc]] = field(default_factory=list)
    plans: list[Loc] = field(default_factory=list)
    # Terms the checker lowers to the core (casts, unsigned constants) occur in the rules.
    surface: bool = False
    # `.override r` in a component instance: the bases' rules for r are dropped.
    overrides: list[str] = field(default_factory=list)
    # Relations declared `eqrel`, with where the qualifier is (lowered by tasks/eqrel.py).
    eqrels: list[tuple[str, Loc]] = field(default_factory=list)
    # The ids of the facts the lexer took whole: constants only, each a plain literal.
    fast: set[int] = field(default_factory=set)
    # `choice-domain`: (relation, key attributes, where), lowered by tasks/choice.py.
    choices: list[tuple[str, tuple[str, ...], Loc]] = field(default_factory=list)
    # Subsumptive rules, lowered to `@sub:r` pair rules (tasks/subsume.py).
    subsumptions: list[Rule] = field(default_factory=list)
    # Aggregates occur in the rules (lowered by tasks/aggregates.py).
    aggregates: bool = False
    # `.functor` declarations (tasks/user_functors.py binds them to Python functions).
    functors: list = field(default_factory=list)

    def absorb(self, other: Parsed) -> None:
        """Add a component instance's statements after these."""
        for name in ("decls", "types", "ios", "rules", "pragmas", "plans", "eqrels",
                     "functors", "subsumptions"):
            getattr(self, name).extend(getattr(other, name))
        self.fast |= other.fast
        self.aggregates |= other.aggregates
        self.surface = self.surface or other.surface


def parse(text: str, filename: str = "<input>", line_map=None) -> Parsed:
    """Return the unchecked statements of `text`, up to the first syntax error if any."""
    source = Source(text, filename, line_map)
    tokens, lex_error = tokenize(source)
    parser = _Parser(source, merge_qualified(tokens))
    try:
        parser.parse()
    except DatalogError as e:
        # A parse error at the cut made by a lexer error is only its echo.
        parser.out.error = lex_error or e
    else:
        parser.out.error = lex_error
    return parser.out


class _Parser:
    __slots__ = ("source", "toks", "i", "depth", "path_top", "out", "comps", "inits", "prefix",
                 "level")

    def __init__(self, source: Source, tokens: list[Token], comps: dict | None = None,
                 prefix: str = "", level: int = 0) -> None:
        self.source = source
        self.toks = tokens
        self.i = 0
        self.depth = 0
        self.path_top = 0  # the depth at the current path atom's '['
        self.out = Parsed()
        self.comps: dict[str, Comp] = dict(comps or {})  # the components in scope
        self.inits: list[Init] = []
        self.prefix = prefix  # the instance being parsed: "a." or "a.b.", "" at top level
        self.level = level

    # -- cursor -------------------------------------------------------------------------------
    @property
    def tok(self) -> Token:
        return self.toks[self.i]

    def peek(self, k: int = 1) -> Token:
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def loc(self, tok: Token | None = None) -> Loc:
        return self.source.loc((tok or self.tok).pos)

    def at(self, text: str) -> bool:
        tok = self.tok
        return tok.kind == "punct" and tok.text == text

    def error(self, what: str, tok: Token | None = None) -> DatalogError:
        return self.source.error((tok or self.tok).pos, what)

    def expected(self, what: str) -> DatalogError:
        return self.error(f"expected {what} but found {self.tok.describe()}")

    def unsupported(self, what: str, tok: Token | None = None) -> DatalogError:
        return self.error(f"{what} is not supported", tok)

    def take(self) -> Token:
        tok = self.toks[self.i]
        if tok.kind != "eof":
            self.i += 1
        return tok

    def expect(self, text: str) -> Token:
        if not self.at(text):
            raise self.expected(f"'{text}'")
        return self.take()

    def ident(self, what: str) -> Token:
        if self.tok.kind != "ident":
            raise self.expected(what)
        return self.take()

    def nest(self) -> None:
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise self.error(f"nesting deeper than {MAX_NESTING} levels")

    # -- statements ---------------------------------------------------------------------------
    def parse(self) -> None:
        # Statements are appended only once complete, so `out` never holds half a statement.
        toks, rules, fast, source = self.toks, self.out.rules, self.out.fast, self.source
        while True:
            tok = toks[self.i]
            if tok.kind == "fact":  # the lexer's whole facts, most of a large program
                self.i += 1
                rule = simple_fact(source, tok)
                rules.append(rule)
                fast.add(id(rule))
            elif tok.kind == "eof":
                check_components(self)  # every component of this scope, instantiated or not
                for init in self.inits:
                    instantiate(self, init)
                return
            else:
                self.statement()

    def statement(self) -> None:
        tok = self.tok
        if tok.kind == "directive":
            name = tok.value
            if name == "decl":
                self.decl()
            elif name == "type":
                self.type_def()
            elif name in ("number_type", "symbol_type"):
                self.take()
                t = self.ident("a type name")
                base = TypeRef(name[:-5], self.loc(tok))
                self.out.types.append(TypeDef(t.text, "subtype", (base,), self.loc(t)))
            elif name in ("input", "output", "printsize", "limitsize"):
                self.io(name)
            elif name == "pragma":
                parse_pragma(self)
            elif name == "plan":
                parse_plan(self)
            elif name == "comp":
                comp_def(self)
            elif name == "init":
                init_def(self)
            elif name == "override":
                override(self)
            elif name == "functor":
                self.out.functors.append(parse_functor(self))
            else:
                raise self.unsupported(f"'.{name}'{UNSUPPORTED_DIRECTIVES[name]}")
        elif tok.kind == "ident":
            self.rule()
        elif self.at("#"):
            word = self.peek()
            shown = "#" + word.text if word.kind == "ident" and word.pos == tok.pos + 1 else "#"
            raise self.error(f"'{shown}' needs the C preprocessor, which --no-preprocessor "
                             "turned off")
        else:
            raise self.expected("a directive, a rule or a fact")

    def decl(self) -> None:
        start = self.take()
        names = [self.ident("a relation name")]
        while self.at(","):  # `.decl A, B(x:number)`: several relations, one signature
            self.take()
            names.append(self.ident("a relation name"))
        name = names[0]
        self.expect("(")
        attrs: list[str] = []
        types: list[TypeRef] = []
        if not self.at(")"):
            while True:
                attr = self.ident("an attribute name")
                if attr.text in attrs:  # as Soufflé: "Doubly defined attribute name"
                    raise self.error(f"attribute '{attr.text}' of {name.text} is declared twice",
                                     attr)
                self.expect(":")
                if self.at("["):
                    raise self.unsupported("'[...]' (record types)")
                t = self.ident("a type name")
                attrs.append(attr.text)
                types.append(TypeRef(t.text, self.loc(t)))
                if not self.at(","):
                    break
                self.take()
        self.expect(")")
        extra_io: list[str] = []
        eqrel: Token | None = None
        choice = None
        # A qualifier is a known word not opening an atom: `A(1).` may follow on the next line.
        while (self.tok.kind == "ident" and self.tok.text in DECL_QUALIFIERS
               and not (self.peek().kind == "punct" and self.peek().text in ("(", ",", ":-"))):
            q = self.take()
            if q.text == "eqrel":
                eqrel = q
            if q.text == "choice":
                choice = parse_choice(self, q)
            if q.text in ("input", "output", "printsize"):
                extra_io.append(q.text)
        for name in names:
            self.out.decls.append(RawDecl(name.text, tuple(attrs), tuple(types),
                                          self.loc(start), self.loc(name)))
            for kind in extra_io:
                self.out.ios.append(IO(kind, name.text, (), self.loc(name)))
            if eqrel is not None:
                self.out.eqrels.append((name.text, self.loc(eqrel)))
            if choice is not None:
                self.out.choices.append((name.text, *choice))

    def type_def(self) -> None:
        self.take()
        name = self.ident("a type name")
        loc = self.loc(name)
        if self.at("<:"):
            self.take()
            base = self.ident("a base type")
            ref = TypeRef(base.text, self.loc(base))
            self.out.types.append(TypeDef(name.text, "subtype", (ref,), loc))
            return
        if not self.at("="):
            raise self.expected("'<:' or '='")
        self.take()
        if self.at("["):
            return record_type(self, name.text, loc)
        bases: list[TypeRef] = []
        while True:
            base = self.ident("a type name")
            if self.at("{") and not bases:
                return adt_type(self, name.text, loc, base)
            if self.at("{"):
                raise self.error("a union of types cannot hold an ADT branch", base)
            bases.append(TypeRef(base.text, self.loc(base)))
            if not self.at("|"):
                break
            self.take()
        self.out.types.append(TypeDef(name.text, "equiv", tuple(bases), loc))

    def io(self, kind: str) -> None:
        self.take()
        names = [self.ident("a relation name")]
        while self.at(","):
            self.take()
            names.append(self.ident("a relation name"))
        options: list[tuple[str, str]] = []
        if self.at("("):
            self.take()
            while not self.at(")"):
                key = self.ident("an option name")
                self.expect("=")
                value = self.tok
                if value.kind not in ("string", "ident", "int", "float"):
                    raise self.expected("an option value")
                self.take()
                options.append((key.text, value.value if value.kind == "string" else value.text))
                if not self.at(","):
                    break
                self.take()
            self.expect(")")
        for name in names:
            self.out.ios.append(IO(kind, name.text, tuple(options), self.loc(name)))

    # -- rules --------------------------------------------------------------------------------
    def rule(self) -> None:
        first = self.tok
        heads = [self.atom()]
        while self.at(","):
            self.take()
            heads.append(self.atom())
        loc = self.loc(first)
        if self.at(".") and len(heads) == 1:
            self.take()
            self.out.rules.append(Rule(tuple(heads), (), loc))
            return
        if self.at("<="):
            return parse_subsumption(self, heads, first)
        if not self.at(":-"):
            raise self.expected("':-' or '.'" if len(heads) == 1 else "':-'")
        self.take()
        bodies = self.disjunction()
        if not self.at("."):
            raise self.expected("',' or '.'")
        self.take()
        self.out.rules.extend(Rule(tuple(heads), body, loc) for body in bodies)

    def atom(self) -> Atom:
        name = self.ident("a relation name")
        if not self.at("("):
            raise self.expected("'('")
        self.take()
        args: list[Term] = []
        if not self.at(")"):
            while True:
                args.append(self.expr())
                if not self.at(","):
                    break
                self.take()
        self.expect(")")
        return Atom(name.text, tuple(args), self.loc(name))

    def disjunction(self) -> list[tuple[Literal, ...]]:
        alts = self.conjunction()
        while self.at(";"):
            self.take()
            alts = alts + self.conjunction()
            if len(alts) > MAX_DNF:
                raise self.error(f"disjunction expands into more than {MAX_DNF} rules")
        return alts

    def conjunction(self) -> list[tuple[Literal, ...]]:
        # Each literal's options are kept apart and joined once at the end: concatenating
        # tuples literal by literal made a body of n literals cost n^2.
        parts: list[list[tuple[Literal, ...]]] = []
        count = 1
        while True:
            options = self.literal()
            count *= len(options)
            if count > MAX_DNF:
                raise self.error(f"disjunction expands into more than {MAX_DNF} rules")
            parts.append(options)
            if not self.at(","):
                return [tuple(itertools.chain.from_iterable(combo))
                        for combo in itertools.product(*parts)]
            self.take()

    def literal(self) -> list[tuple[Literal, ...]]:
        tok = self.tok
        if self.at("!"):
            self.take()
            if self.at("(") or self.at("!"):  # `!(a(x), b(x))`: Soufflé negates the group
                self.nest()
                alts = negate_dnf(self.literal(), self.loc(tok))
                self.depth -= 1
                if len(alts) > MAX_DNF:
                    raise self.error(f"disjunction expands into more than {MAX_DNF} rules", tok)
                return alts
            if (self.tok.kind == "ident" and self.tok.text in CONSTRAINTS
                    and self.peek().text == "("):
                return [(self.constraint(True),)]
            if not (self.tok.kind == "ident" and self.peek().kind == "punct"
                    and self.peek().text == "("):
                raise self.expected("an atom after '!'")
            return [(Negation(self.atom(), self.loc(tok)),)]
        if self.at("["):
            return [(self.path_atom(),)]
        if tok.kind == "ident":
            nxt = self.peek()
            if nxt.kind == "punct" and nxt.text == "(":
                if tok.text in CONSTRAINTS:
                    return [(self.constraint(False),)]
                if tok.text not in FUNCTORS and tok.text != "as":
                    return [(self.atom(),)]
            elif tok.text == "true":
                self.take()
                return [()]
            elif tok.text == "false":
                self.take()
                return []
        if tok.kind in ("directive", "eof") or (
                tok.kind == "punct" and tok.text not in ("(", "-", "@", "[", "$")):
            raise self.expected("an atom, a negation or a comparison")
        if self.at("(") and self.is_group():
            self.take()
            self.nest()
            alts = self.disjunction()
            self.depth -= 1
            if not self.at(")"):
                raise self.expected("',', ';' or ')'")
            self.take()
            return alts
        left = self.expr()
        op = self.tok
        if not (op.kind == "punct" and op.text in COMPARISONS):
            raise self.expected("a comparison operator")
        self.take()
        right = self.expr()
        return [(Comparison(op.text, left, right, self.loc(op)),)]

    # -- path atoms: [EXPR](a, b) ----------------------------------------------------------
    def path_atom(self) -> PathAtom:
        start = self.take()
        self.path_top = self.depth
        expr = self.path_alt()
        if not self.at("]"):
            raise self.expected("'.', '|', '+', '*', '?' or ']' in a path expression")
        self.take()
        self.expect("(")
        args = [self.expr()]
        while self.at(","):
            self.take()
            args.append(self.expr())
        if len(args) != 2 or not self.at(")"):
            raise self.error("a path atom takes two arguments: [EXPR](source, target)")
        self.take()
        return PathAtom(expr, (args[0], args[1]), self.loc(start))

    def path_alt(self) -> PathExpr:
        first = self.tok
        parts = [self.path_seq()]
        while self.at("|"):
            self.take()
            parts.append(self.path_seq())
        return parts[0] if len(parts) == 1 else PathExpr("|", tuple(parts), loc=self.loc(first))

    def path_seq(self) -> PathExpr:
        first = self.tok
        parts = [self.path_unary()]
        while self.at(".") or self.tok.kind == "directive":
            if self.tok.kind == "directive":  # `a.type`: the lexer took `.type` for a directive
                tok = self.take()
                parts.append(self.path_postfix(PathExpr("rel", name=tok.value,
                                                        loc=self.source.loc(tok.pos + 1))))
                continue
            self.take()
            parts.append(self.path_unary())
        return parts[0] if len(parts) == 1 else PathExpr(".", tuple(parts), loc=self.loc(first))

    def path_unary(self) -> PathExpr:
        tok = self.tok
        self.nest()
        if self.depth - self.path_top > MAX_PATH_NESTING:
            raise self.error(f"path expression nested deeper than {MAX_PATH_NESTING} levels")
        if self.at("^"):
            self.take()
            expr = PathExpr("^", (self.path_unary(),), loc=self.loc(tok))
        elif self.at("("):
            self.take()
            inner = self.path_alt()
            self.expect(")")
            expr = self.path_postfix(inner)
        elif tok.kind == "ident" and tok.text.rstrip("?"):
            self.take()
            # `knows?` is one identifier to the lexer (Soufflé names may hold '?').
            name = tok.text.rstrip("?")
            expr = PathExpr("rel", name=name, loc=self.loc(tok))
            expr = self.path_postfix(expr, tok.text[len(name):], tok)
        else:
            raise self.expected("a relation name, '^' or '(' in a path expression")
        self.depth -= 1
        return expr

    def path_postfix(self, expr: PathExpr, ops: str = "", first: Token | None = None) -> PathExpr:
        # A run of postfix operators is one operator (e++ = e+, e?? = e?, any mix = e*), so a
        # long run cannot make the expression deeper than the nesting the parser bounds.
        while True:
            tok = self.tok
            if tok.kind == "punct" and tok.text in ("+", "*", "**"):
                ops += tok.text
            elif tok.kind == "ident" and not tok.text.strip("?"):
                ops += tok.text
            else:
                break
            first = first or tok
            self.take()
        if not ops:
            return expr
        op = ops[0] if len(set(ops)) == 1 else "*"
        return PathExpr(op, (expr,), loc=self.loc(first))

    def is_group(self) -> bool:
        """Return True when the '(' at the cursor opens a body group, not an arithmetic term."""
        toks = self.toks
        depth = 0
        j = self.i
        while j < len(toks):
            t = toks[j]
            if t.kind == "eof":
                return False
            if t.kind == "punct":
                if t.text == "(":
                    depth += 1
                elif t.text == ")":
                    depth -= 1
                    if depth == 0:
                        return False
                elif depth == 1 and (t.text in COMPARISONS or t.text in (",", ";", "!")):
                    return True
            elif depth == 1 and t.kind == "ident" and t.text in ("true", "false"):
                return True
            elif (depth == 1 and t.kind == "ident" and toks[j + 1].kind == "punct"
                  and toks[j + 1].text == "(" and t.text not in FUNCTORS):
                return True
            j += 1
        return False

    def cast(self) -> Cast:
        start = self.take()
        self.take()  # (
        self.nest()
        term = self.expr()
        self.depth -= 1
        self.expect(",")
        ty = self.ident("a type name")
        self.expect(")")
        self.out.surface = True
        return Cast(term, ty.text, self.loc(start), self.loc(ty))

    # -- terms --------------------------------------------------------------------------------
    def expr(self) -> Term:
        return self.binary()[0]

    def binary_prec(self) -> int | None:
        """Return the precedence of the binary operator at the cursor, or None."""
        tok = self.tok
        if tok.kind in ("punct", "ident"):
            return BINARY_PREC.get(tok.text)
        return None

    def binary(self, min_prec: int = 0) -> tuple[Term, int]:
        """Parse by precedence climbing: Soufflé's lor < lxor < land < bor < bxor < band <
        shifts < + - < * / %; all left-associative."""
        term, depth = self.unary()
        while True:
            prec = self.binary_prec()
            if prec is None or prec < min_prec:
                return term, depth
            op = self.take()
            right, rdepth = self.binary(prec + 1)
            depth = max(depth, rdepth) + 1
            if depth > MAX_EXPR_DEPTH:
                raise self.error(f"expression deeper than {MAX_EXPR_DEPTH} operations", op)
            term = BinOp(op.text, term, right, self.loc(op))

    def unary(self) -> tuple[Term, int]:
        tok = self.tok
        if not (self.at("-") or (tok.kind == "ident" and tok.text in ("bnot", "lnot"))):
            return self.power()
        op = self.take()
        self.nest()
        term, depth = self.unary()
        self.depth -= 1
        if op.text != "-":
            return Call(op.text, (term,), self.loc(op)), depth + 1
        if isinstance(term, Const) and term.kind in ("number", "float"):
            # `-5` is the constant -5 (facts need constants), not the expression 0 - 5.
            return Const(-term.value, term.kind, self.loc(op)), depth
        zero = Const(0, "number", self.loc(op))
        return BinOp("-", zero, term, self.loc(op)), depth + 1

    def power(self) -> tuple[Term, int]:
        """Parse `a ^ b`: binds tighter than unary minus, right-associative (as in Soufflé)."""
        term, depth = self.primary()
        if not self.at("^"):
            if self.tok.kind == "punct" and self.tok.text in ("**", "&", "|", "~"):
                raise self.unsupported(f"the operator '{self.tok.text}'")
            return term, depth
        op = self.take()
        self.nest()
        right, rdepth = self.unary()
        self.depth -= 1
        depth = max(depth, rdepth) + 1
        if depth > MAX_EXPR_DEPTH:
            raise self.error(f"expression deeper than {MAX_EXPR_DEPTH} operations", op)
        return BinOp("^", term, right, self.loc(op)), depth

    def call(self) -> tuple[Term, int]:
        """Parse an intrinsic functor's call `name(args...)`."""
        name = self.take()
        self.take()  # (
        args, depth = self.terms(")")
        return Call(name.text, tuple(args), self.loc(name)), depth + 1

    def terms(self, close: str) -> tuple[list[Term], int]:
        """Parse `t, ...` up to `close` (consumed): the terms and their deepest nesting."""
        self.nest()
        args: list[Term] = []
        depth = 0
        if not self.at(close):
            while True:
                arg, adepth = self.binary()
                args.append(arg)
                depth = max(depth, adepth)
                if not self.at(","):
                    break
                self.take()
        self.depth -= 1
        self.expect(close)
        return args, depth

    def aggregate(self) -> Aggregate:
        """Parse `count : { body }`, `sum e : { body }` (min, max, mean alike); the body may be
        a single atom without braces. Lowered by tasks/aggregates.py."""
        name = self.take()
        self.nest()
        target = None
        if name.text != "count":
            target = self.expr()
        self.expect(":")
        if self.at("{"):
            brace = self.take()
            bodies = self.disjunction()
            self.expect("}")
            if len(bodies) != 1:
                raise self.unsupported("a disjunction inside an aggregate", brace)
            body = bodies[0]
        else:
            body = (self.atom(),)
        self.depth -= 1
        self.out.aggregates = True
        return Aggregate(name.text, target, body, self.loc(name))

    def constraint(self, negated: bool) -> Comparison:
        """Parse `contains(a, b)` or `match(a, b)` (after `!` when negated) as a literal."""
        call, _ = self.call()
        if len(call.args) != 2:
            raise self.error(f"'{call.name}' takes two arguments", None)
        op = ("!" if negated else "") + call.name
        return Comparison(op, call.args[0], call.args[1], call.loc)

    def primary(self) -> tuple[Term, int]:
        tok = self.tok
        kind = tok.kind
        if kind in ("int", "uint"):
            self.take()
            if kind == "uint":
                self.out.surface = True
            return Const(tok.value, "number" if kind == "int" else "unsigned", self.loc(tok)), 0
        if kind == "float":
            self.take()
            return Const(tok.value, "float", self.loc(tok)), 0
        if kind == "string":
            self.take()
            return Const(tok.value, "symbol", self.loc(tok)), 0
        if kind == "ident":
            name = tok.text
            nxt = self.peek()
            calls = nxt.kind == "punct" and nxt.text == "("
            if name == "_":
                self.take()
                return Wildcard(self.loc(tok)), 0
            if name == "as" and calls:
                return self.cast(), 0
            if name in AGGREGATES and not calls:
                return self.aggregate(), 0
            if calls and name in CALLS:
                return self.call()
            if calls and name in CONSTRAINTS:
                raise self.error(f"'{name}(...)' is a constraint, not a value: write it as a "
                                 "body literal", tok)
            if calls and name in FUNCTORS:
                raise self.unsupported(f"the functor '{name}'{UNSUPPORTED_FUNCTORS.get(name, '')}")
            if calls:
                raise self.error(f"'{name}(...)' cannot be used as a term (functors are not "
                                 "supported)")
            if name == "nil":
                self.take()
                self.out.surface = True
                return Record((), "nil", self.loc(tok)), 0
            self.take()
            return Var(name, self.loc(tok)), 0
        if self.at("("):
            self.take()
            self.nest()
            term, depth = self.binary()
            self.depth -= 1
            self.expect(")")
            return term, depth
        if self.at("@"):  # a user-defined functor's call (tasks/user_functors.py binds it)
            nxt = self.peek()
            if nxt.kind != "ident" or nxt.pos != tok.pos + 1:
                raise self.expected("a functor name after '@'")
            self.take()
            call, depth = self.call()
            return Call("@" + call.name, call.args, self.loc(tok)), depth
        if self.at("["):
            return record_term(self)
        if self.at("$"):
            return branch_term(self)
        raise self.expected("a term")
