"""Program -> tasks: condense the precedence graph of relations into a DAG of SCC tasks.

Edges go from every body relation (negated ones too) to the rule's head relation. Each SCC is a
task; ids follow (level, declaration index of the task's first relation), so numbering is
deterministic and topological. A rule with several heads is split into one rule per head (same
body), so every Task.rules entry has exactly one head and lives in exactly one task.
"""

from __future__ import annotations

from levelflow.tasks.ast import Program, Rule
from levelflow.tasks.graph import TaskGraph
from levelflow.tasks.rule_graph import precedence
from levelflow.tasks.strata import Precedence
from levelflow.tasks.subsume import subsumed
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


def _task_order(prec: Precedence) -> tuple[list[int], list[tuple[int, int]]]:
    """Return the SCCs in task-id order and the edges between SCCs."""
    comps, comp_of = prec.comps, prec.comp_of
    comp_edges = sorted({(comp_of[u], comp_of[v]) for u in range(len(comp_of))
                         for v in prec.succ[u] if comp_of[u] != comp_of[v]})
    levels = TaskGraph([str(k) for k in range(len(comps))], comp_edges).level
    # members are sorted ids = declaration order, so members[0] is the first declared relation.
    return sorted(range(len(comps)), key=lambda k: (levels[k], comps[k][0])), comp_edges


def build_tasks(program: Program) -> ProgramTasks:
    """Return the program's tasks (one per SCC of relations) and their TaskGraph."""
    names = list(program.decls)
    prec = program.precedence or precedence(names, program.rules)
    order, comp_edges = _task_order(prec)
    new_id = [0] * len(prec.comps)
    for i, k in enumerate(order):
        new_id[k] = i
    rules_of: list[list[Rule]] = [[] for _ in prec.comps]
    for rule in split_heads(program.rules):
        rules_of[prec.comp_of[prec.ids[rule.heads[0].relation]]].append(rule)
    tasks: list[Task] = []
    for i, k in enumerate(order):
        relations = tuple(names[v] for v in prec.comps[k])
        rules = tuple(rules_of[k])
        subs = tuple(s for s in program.subsumptions if subsumed(s) in relations)
        tasks.append(Task(i, "+".join(relations), relations, rules, prec.recursive(k),
                          any(r in program.inputs for r in relations),
                          frozenset().union(*(r.reads() for r in rules + subs if r.body)),
                          len(relations) == 1 and relations[0] in program.closures, subs))
    edges = sorted((new_id[a], new_id[b]) for a, b in comp_edges)
    graph = TaskGraph([t.name for t in tasks], edges)
    return ProgramTasks(program, tuple(tasks), graph, _initial(program, tasks),
                        _edge_reads(tasks, graph))


def _initial(program: Program, tasks: list[Task]) -> tuple[int, ...]:
    """Return the ids of tasks a from-scratch run activates: input, facts, or atom-free rules."""
    fact_heads = {h.relation for r in program.facts for h in r.heads}
    # A rule with no positive body atom (a fact, `p(1) :- 1 < 2.`, `p() :- !q().`) derives
    # tuples without any input changing, so nothing upstream would ever activate its task.
    return tuple(t.id for t in tasks
                 if t.input or any(r in fact_heads for r in t.relations)
                 or any(all(neg for _, _, neg in rule.body_atoms()) for rule in t.rules))


def _edge_reads(tasks: list[Task], graph: TaskGraph) -> tuple:
    """Return per task v a tuple of (child c, positions in v.relations that c's rules read)."""
    return tuple(
        tuple((c, tuple(i for i, r in enumerate(task.relations) if r in tasks[c].reads))
              for c in graph.children[v])
        for v, task in enumerate(tasks))
