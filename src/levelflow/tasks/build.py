"""Program -> tasks: condense the precedence graph of relations into a DAG of SCC tasks.

Edges go from every body relation (negated ones too) to the rule's head relation. Each SCC is a
task; ids follow (level, declaration index of the task's first relation), so numbering is
deterministic and topological. A rule with several heads is split into one rule per head (same
body), so every Task.rules entry has exactly one head and lives in exactly one task.
"""

from __future__ import annotations

from levelflow.tasks.ast import Atom, Negation, Program, Rule
from levelflow.tasks.graph import TaskGraph
from levelflow.tasks.strata import strongly_connected
from levelflow.tasks.tasks import ProgramTasks, Task


def split_heads(rules: tuple[Rule, ...]) -> list[Rule]:
    """Return the rules with every multi-head rule split into one single-head rule per head."""
    out: list[Rule] = []
    for rule in rules:
        if len(rule.heads) == 1:
            out.append(rule)
        else:
            out.extend(Rule((head,), rule.body, rule.loc) for head in rule.heads)
    return out


def build_tasks(program: Program) -> ProgramTasks:
    """Return the program's tasks (one per SCC of relations) and their TaskGraph."""
    names = list(program.decls)
    ids = {name: i for i, name in enumerate(names)}
    n = len(names)
    rules = split_heads(program.rules)
    succ: list[set[int]] = [set() for _ in range(n)]
    for rule in rules:
        h = ids[rule.heads[0].relation]
        for lit in rule.body:
            atom = lit.atom if isinstance(lit, Negation) else lit
            if isinstance(atom, Atom):
                succ[ids[atom.relation]].add(h)
    comps = strongly_connected(n, [sorted(s) for s in succ])
    comp_of = [0] * n
    for k, members in enumerate(comps):
        for v in members:
            comp_of[v] = k
    comp_edges = sorted({(comp_of[u], comp_of[v]) for u in range(n) for v in succ[u]
                         if comp_of[u] != comp_of[v]})
    levels = TaskGraph([str(k) for k in range(len(comps))], comp_edges).level
    # members are sorted ids = declaration order, so members[0] is the first declared relation.
    order = sorted(range(len(comps)), key=lambda k: (levels[k], comps[k][0]))
    new_id = [0] * len(comps)
    for i, k in enumerate(order):
        new_id[k] = i
    rules_of: list[list[Rule]] = [[] for _ in comps]
    for rule in rules:
        rules_of[comp_of[ids[rule.heads[0].relation]]].append(rule)
    tasks: list[Task] = []
    for i, k in enumerate(order):
        members = comps[k]
        relations = tuple(names[v] for v in members)
        recursive = len(members) > 1 or members[0] in succ[members[0]]
        tasks.append(Task(i, "+".join(relations), relations, tuple(rules_of[k]), recursive,
                          any(r in program.inputs for r in relations)))
    edges = sorted((new_id[a], new_id[b]) for a, b in comp_edges)
    graph = TaskGraph([t.name for t in tasks], edges)
    return ProgramTasks(program, tuple(tasks), graph)
