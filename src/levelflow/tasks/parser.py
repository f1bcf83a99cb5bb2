"""Recursive-descent parser from tokens to unchecked declarations, directives and rules.

Constant: the token list. Changes: the cursor `i` and the nesting depth (bounded, so no input
can exhaust Python's stack). Disjunctions `;` in rule bodies are expanded here into one rule per
alternative (disjunctive normal form), so the AST only ever holds conjunctive bodies.
Declarations, terms and path atoms are decl_syntax.py's, term_syntax.py's and path_syntax.py's
(functions of this parser, which they see through parser_protocol.py).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from levelflow.tasks import term_syntax
from levelflow.tasks.ast import (
    IO,
    Atom,
    Comparison,
    Literal,
    Loc,
    Negation,
    RawDecl,
    Rule,
    Term,
    TypeDef,
    TypeRef,
)
from levelflow.tasks.comp_check import check_components
from levelflow.tasks.comp_instances import instantiate_all
from levelflow.tasks.components import Comp, Init, comp_def, init_def, merge_qualified, override
from levelflow.tasks.decl_syntax import parse_decl, parse_io, parse_type
from levelflow.tasks.directives import parse_plan, parse_pragma
from levelflow.tasks.errors import DatalogError
from levelflow.tasks.functors import CONSTRAINTS
from levelflow.tasks.lexer import Source, Token, simple_fact, tokenize
from levelflow.tasks.lower import MAX_DNF, negate_dnf
from levelflow.tasks.path_syntax import path_atom
from levelflow.tasks.subsume import parse_subsumption
from levelflow.tasks.term_syntax import FUNCTORS, constraint
from levelflow.tasks.user_functors import parse_functor

MAX_NESTING = 100  # parentheses, unary minus and body groups

COMPARISONS = frozenset({"=", "!=", "<", "<=", ">", ">="})
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
    # `.override r` in a component's body: its bases' clauses for r are dropped.
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
                     "functors", "subsumptions", "choices"):
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
    __slots__ = ("source", "toks", "i", "depth", "path_top", "out", "comps", "inits", "scope",
                 "level")

    def __init__(self, source: Source, tokens: list[Token], scope: Comp | None = None,
                 level: int = 0) -> None:
        self.source = source
        self.toks = tokens
        self.i = 0
        self.depth = 0
        self.path_top = 0  # the depth at the current path atom's '['
        self.out = Parsed()
        self.comps: dict[str, Comp] = {}  # the components this scope defines
        self.inits: list[Init] = []
        self.scope = scope  # the component whose body this is; None at the top level
        self.level = level  # components enclosing it

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
                if self.scope is None:  # a component's body is instantiated from outside
                    check_components(self)  # every component, instantiated or not
                    instantiate_all(self)
                return
            else:
                self.statement()

    def statement(self) -> None:
        tok = self.tok
        if tok.kind == "directive":
            name = tok.value
            if name == "decl":
                parse_decl(self)
            elif name == "type":
                parse_type(self)
            elif name in ("number_type", "symbol_type"):
                self.take()
                t = self.ident("a type name")
                base = TypeRef(name[:-5], self.loc(tok))
                self.out.types.append(TypeDef(t.text, "subtype", (base,), self.loc(t)))
            elif name in ("input", "output", "printsize", "limitsize"):
                parse_io(self, name)
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
                args.append(term_syntax.expr(self))
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
                return [(constraint(self, True),)]
            if not (self.tok.kind == "ident" and self.peek().kind == "punct"
                    and self.peek().text == "("):
                raise self.expected("an atom after '!'")
            return [(Negation(self.atom(), self.loc(tok)),)]
        if self.at("["):
            return [(path_atom(self),)]
        if tok.kind == "ident":
            nxt = self.peek()
            if nxt.kind == "punct" and nxt.text == "(":
                if tok.text in CONSTRAINTS:
                    return [(constraint(self, False),)]
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
        left = term_syntax.expr(self)
        op = self.tok
        if not (op.kind == "punct" and op.text in COMPARISONS):
            raise self.expected("a comparison operator")
        self.take()
        right = term_syntax.expr(self)
        return [(Comparison(op.text, left, right, self.loc(op)),)]


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

    # -- terms (term_syntax.py; the syntax modules call these through parser_protocol) ---------
    def expr(self) -> Term:
        return term_syntax.expr(self)

    def terms(self, close: str) -> tuple[list[Term], int]:
        return term_syntax.terms(self, close)
