"""The precedence graph of a program's rules: each body relation points to the heads reading it.

Apart from `strata` (the graph's type and its SCCs), which `tasks.ast` names: this module reads
rules, so it imports the AST, and the AST does not import it.
"""

from __future__ import annotations

from collections.abc import Iterable

from levelflow.tasks.ast import Rule
from levelflow.tasks.strata import Precedence, strongly_connected


def precedence(names: Iterable[str], rules: Iterable[Rule]) -> Precedence:
    """Return the precedence graph of the named relations (atoms of other names are skipped)."""
    ids = {name: i for i, name in enumerate(names)}
    succ: list[set[int]] = [set() for _ in ids]
    for rule in rules:
        if not rule.body:  # a fact reads nothing
            continue
        heads = [ids[h.relation] for h in rule.heads if h.relation in ids]
        for _, atom, _ in rule.body_atoms():
            if atom.relation in ids:
                succ[ids[atom.relation]].update(heads)
    out = [sorted(s) for s in succ]
    comps = strongly_connected(len(ids), out)
    comp_of = [0] * len(ids)
    for k, members in enumerate(comps):
        for v in members:
            comp_of[v] = k
    return Precedence(ids, out, comps, comp_of)
