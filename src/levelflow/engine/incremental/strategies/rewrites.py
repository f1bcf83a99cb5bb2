"""The rule rewrites the strategies evaluate, shared by the Spark and in-worker versions.

Stand-in relations carry names the parser cannot produce, so they never meet a user's:
  @C:r - candidates of r with their rank as a last attribute (the support check),
  @L:r - r's live tuples (old minus suspects) with their rank,
  @D:r - r's suspects (re-derivation).
"""

from __future__ import annotations

from levelflow.tasks.ast import Atom, Comparison, Decl, Negation, Rule, Var

DELETED = "@D:"
CANDIDATE = "@C:"
LIVE = "@L:"
RANK_VAR = "@rank"


def ranked_decl(prefix: str, decl: Decl) -> Decl:
    """Return the stand-in declaration of a relation with its rank as a last attribute."""
    return Decl(prefix + decl.name, decl.attrs + (RANK_VAR,), decl.types + ("number",))


def support_rule(rule: Rule, names) -> tuple[Rule, dict[int, str], dict[int, str]]:
    """Return the rule prefixed by its head's candidate, own atoms read live with smaller rank.

    Also returns the body positions of the live atoms and of the other atoms (with the
    relation each reads): a candidate is supported when the rewritten body has a row.
    """
    head = rule.heads[0]
    rank = Var(RANK_VAR)
    body: list = [Atom(CANDIDATE + head.relation, head.args + (rank,))]
    live: dict[int, str] = {}
    other: dict[int, str] = {}
    for lit in rule.body:
        pos = len(body)
        atom = lit.atom if isinstance(lit, Negation) else lit
        if isinstance(lit, Atom) and lit.relation in names:
            own_rank = Var(f"{RANK_VAR}{pos}")
            body.append(Atom(LIVE + lit.relation, lit.args + (own_rank,)))
            body.append(Comparison("<", own_rank, rank))
            live[pos] = lit.relation
            continue
        body.append(lit)
        if isinstance(atom, Atom):
            other[pos] = atom.relation
    return Rule(rule.heads, tuple(body), rule.loc), live, other


def rederive_rule(rule: Rule, head: Atom) -> Rule:
    """Return the rule prefixed by its head's suspects: only their bindings are joined."""
    return Rule(rule.heads, (Atom(DELETED + head.relation, head.args),) + rule.body, rule.loc)


def stand_in_decls(decls, names) -> dict[str, Decl]:
    """Return the declarations plus every stand-in of the task's relations."""
    out = dict(decls)
    for n in names:
        out[CANDIDATE + n] = ranked_decl(CANDIDATE, decls[n])
        out[LIVE + n] = ranked_decl(LIVE, decls[n])
        out[DELETED + n] = Decl(DELETED + n, decls[n].attrs, decls[n].types)
    return out


def as_positive(rule: Rule, i: int) -> Rule:
    """Return the rule with the negated atom at position i made positive."""
    body = list(rule.body)
    body[i] = body[i].atom
    return Rule(rule.heads, tuple(body), rule.loc)
