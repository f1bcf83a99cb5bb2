"""A program condenses into one task per SCC of relations; ids are (level, declaration) ordered."""

from __future__ import annotations

import json
import random

import networkx as nx
import pytest

from levelflow.cli import main
from levelflow.tasks import ProgramTasks, build_tasks, parse_program


def tasks_of(text: str) -> ProgramTasks:
    return build_tasks(parse_program(text, "t.dl"))


def decls(*names: str, arity: int = 1) -> str:
    attrs = ", ".join(f"a{i}:number" for i in range(arity))
    return "".join(f".decl {n}({attrs})\n" for n in names)


def summary(pt: ProgramTasks) -> list[tuple[str, int, bool, bool]]:
    """Return (name, level, recursive, input) per task id."""
    return [(t.name, pt.graph.level[t.id], t.recursive, t.input) for t in pt.tasks]


def edge_names(pt: ProgramTasks) -> set[tuple[str, str]]:
    g = pt.graph
    return {(g.names[u], g.names[v]) for u in range(len(g)) for v in g.children[u]}


def test_chain_and_diamond():
    r"""
        E (input)
        |
        P (recursive: path)
       / \
      L   R
       \ /
        J
    """
    pt = tasks_of(decls("J", "L", "R", "P", "E") + """
        .input E
        P(x) :- E(x).
        P(x) :- P(x), E(x).
        L(x) :- P(x).
        R(x) :- P(x).
        J(x) :- L(x), R(x).
    """)
    # Ids follow (level, declaration index): L before R because L is declared first.
    assert summary(pt) == [("E", 0, False, True), ("P", 1, True, False), ("L", 2, False, False),
                           ("R", 2, False, False), ("J", 3, False, False)]
    assert edge_names(pt) == {("E", "P"), ("P", "L"), ("P", "R"), ("L", "J"), ("R", "J")}
    assert pt.task_of("R").id == 3
    with pytest.raises(KeyError):
        pt.task_of("nope")


def test_mutual_recursion_is_one_recursive_task():
    r"""
      C
      |
      A <-> B       A :- B, B :- A: one task "A+B" (declaration order), recursive
      |
      D
    """
    pt = tasks_of(decls("D", "B", "A", "C") + """
        A(x) :- B(x).
        B(x) :- A(x).
        A(x) :- C(x).
        D(x) :- A(x), B(x).
    """)
    assert summary(pt) == [("C", 0, False, False), ("B+A", 1, True, False),
                           ("D", 2, False, False)]
    assert pt.tasks[1].relations == ("B", "A")
    assert [r.heads[0].relation for r in pt.tasks[1].rules] == ["A", "B", "A"]
    assert edge_names(pt) == {("C", "B+A"), ("B+A", "D")}


def test_self_loop_is_recursive_and_a_plain_rule_is_not():
    pt = tasks_of(decls("E", "T", "N") + "T(x) :- T(x), E(x).\nT(x) :- E(x).\nN(x) :- E(x).")
    assert [(t.name, t.recursive) for t in pt.tasks] == [("E", False), ("T", True),
                                                          ("N", False)]


def test_every_declared_relation_is_in_exactly_one_task():
    pt = tasks_of(decls("Unused", "In", "Out", "Fact") + """
        .input In
        Out(x) :- In(x).
        Fact(1).
    """)
    assert summary(pt) == [("Unused", 0, False, False), ("In", 0, False, True),
                           ("Fact", 0, False, False), ("Out", 1, False, False)]
    listed = [r for t in pt.tasks for r in t.relations]
    assert sorted(listed) == sorted(pt.program.decls)
    assert pt.tasks[2].rules == pt.program.facts


def test_negation_is_an_edge():
    r"""
      E   F
      |   :      (dotted: negated)
      +-> N
    """
    pt = tasks_of(decls("N", "E", "F") + "N(x) :- E(x), !F(x).")
    assert summary(pt) == [("E", 0, False, False), ("F", 0, False, False), ("N", 1, False, False)]
    assert edge_names(pt) == {("E", "N"), ("F", "N")}


def test_input_relation_with_rules_is_an_input_task_with_its_rules():
    pt = tasks_of(decls("E", "S") + ".input E\nE(x) :- S(x).\nE(1).")
    assert summary(pt) == [("S", 0, False, False), ("E", 1, False, True)]
    assert len(pt.task_of("E").rules) == 2


def test_multi_head_rule_is_split_per_head_into_their_tasks():
    r"""
      B
      |\          X(x), Y(x) :- B(x), Y(x).   X and Y land in different components:
      | Y <-+     Y is recursive (Y :- B, Y), X just reads Y.
      |  \__|
      X <-- Y
    """
    pt = tasks_of(decls("X", "Y", "B") + "X(x), Y(x) :- B(x), Y(x).\nY(x) :- B(x).")
    x, y = pt.task_of("X"), pt.task_of("Y")
    assert x is not y
    assert [len(r.heads) for t in pt.tasks for r in t.rules] == [1, 1, 1]
    assert [r.heads[0].relation for r in x.rules] == ["X"]
    assert [r.heads[0].relation for r in y.rules] == ["Y", "Y"]
    assert x.rules[0].body == y.rules[0].body
    assert summary(pt) == [("B", 0, False, False), ("Y", 1, True, False), ("X", 2, False, False)]
    # The AST keeps the rule as written.
    assert len(pt.program.rules[0].heads) == 2


def test_renaming_relations_keeps_the_structure():
    text = decls("a", "b", "c", "d") + "b(x) :- a(x).\nc(x) :- b(x), c(x).\nd(x) :- a(x), c(x)."
    renamed = text
    for old, new in (("a", "q"), ("b", "r"), ("c", "s"), ("d", "t")):
        renamed = renamed.replace(f"{old}(", f"{new}(")
    one, two = tasks_of(text), tasks_of(renamed)
    assert [(lv, rec) for _, lv, rec, _ in summary(one)] == \
        [(lv, rec) for _, lv, rec, _ in summary(two)]
    assert [t.relations for t in two.tasks] == [("q",), ("r",), ("s",), ("t",)]
    assert one.graph.children == two.graph.children


def _random_program(rng: random.Random) -> str:
    n = rng.randint(1, 9)
    names = [f"R{i}" for i in range(n)]
    lines = [f".decl {r}(x:number)" for r in names]
    for _ in range(rng.randint(0, 14)):
        head = rng.choice(names)
        body = [f"{rng.choice(names)}(x)" for _ in range(rng.randint(1, 3))]
        lines.append(f"{head}(x) :- {', '.join(body)}.")
    return "\n".join(lines)


def test_random_programs_match_networkx_condensation():
    rng = random.Random(11)
    for _ in range(150):
        text = _random_program(rng)
        pt = tasks_of(text)
        p = pt.program
        ref = nx.DiGraph()
        ref.add_nodes_from(p.decls)
        for rule in p.rules:
            for lit in rule.body:
                ref.add_edge(lit.relation, rule.heads[0].relation)
        cond = nx.condensation(ref)
        members = cond.graph["mapping"]
        # Same partition of relations into tasks.
        assert sorted(sorted(t.relations) for t in pt.tasks) == \
            sorted(sorted(cond.nodes[c]["members"]) for c in cond)
        # Same edges between tasks, same longest-path levels, ids in (level, decl index) order.
        task_comp = [members[t.relations[0]] for t in pt.tasks]
        assert {(task_comp[u], task_comp[v]) for u in range(len(pt.tasks))
                for v in pt.graph.children[u]} == set(cond.edges)
        ref_level = {}
        for c in nx.topological_sort(cond):
            ref_level[c] = max((ref_level[u] + 1 for u in cond.predecessors(c)), default=0)
        assert [pt.graph.level[t.id] for t in pt.tasks] == [ref_level[c] for c in task_comp]
        order = list(p.decls)
        keys = [(pt.graph.level[t.id], order.index(t.relations[0])) for t in pt.tasks]
        assert keys == sorted(keys)
        for t in pt.tasks:
            assert list(t.relations) == sorted(t.relations, key=order.index)
            assert t.name == "+".join(t.relations)
            self_loop = any(ref.has_edge(r, r) for r in t.relations)
            assert t.recursive == (len(t.relations) > 1 or self_loop)
            assert sum(len(r.heads) for r in t.rules) == sum(
                1 for r in p.rules for h in r.heads if h.relation in t.relations)


# -- `levelflow graph` ---------------------------------------------------------------------

PROGRAM = decls("E", "P", "Q", "Out") + """
    .input E
    .output Out
    P(x) :- E(x).
    P(x) :- Q(x).
    Q(x) :- P(x), E(x).
    Out(x) :- P(x), !E(x).
"""


@pytest.fixture()
def program_file(tmp_path):
    path = tmp_path / "prog.dl"
    path.write_text(PROGRAM)
    return path


def run_cli(args, capsys):
    with pytest.raises(SystemExit) as e:
        main(args)
    out, err = capsys.readouterr()
    return e.value.code, out, err


def test_graph_json_schema_is_exact(program_file, capsys, monkeypatch):
    from levelflow.engine import memory

    monkeypatch.setattr(memory, "available_memory", lambda: 1 << 30)
    rows = (1 << 30) // 2 // memory.BYTES_PER_ROW  # what the driver holds on this "machine"
    code, out, err = run_cli(["graph", str(program_file), "--json"], capsys)
    assert (code, err) == (0, "")
    data = json.loads(out)
    assert list(data) == ["tasks", "edges", "levels"]
    assert type(data["levels"]) is int
    for task in data["tasks"]:
        assert list(task) == ["id", "name", "relations", "level", "recursive", "input", "plan",
                              "plan_reason", "driver_rows"]
        assert [type(task[k]) for k in task] == [int, str, list, int, bool, bool, str, str, int]
        assert all(type(r) is str for r in task["relations"])
    for edge in data["edges"]:
        assert type(edge) is list and len(edge) == 2 and all(type(x) is int for x in edge)
    assert data == {
        "tasks": [
            {"id": 0, "name": "E", "relations": ["E"], "level": 0, "recursive": False,
             "input": True, "plan": "global", "plan_reason": "one pass",
             "driver_rows": rows},
            {"id": 1, "name": "P+Q", "relations": ["P", "Q"], "level": 1, "recursive": True,
             "input": False, "plan": "partitioned", "plan_reason": "linear, carries P[0], Q[0]",
             "driver_rows": rows},
            {"id": 2, "name": "Out", "relations": ["Out"], "level": 2, "recursive": False,
             "input": False, "plan": "global", "plan_reason": "one pass",
             "driver_rows": rows},
        ],
        "edges": [[0, 1], [0, 2], [1, 2]],
        "levels": 3,
    }


def test_graph_table_lists_tasks_and_totals(program_file, capsys):
    code, out, err = run_cli(["graph", str(program_file)], capsys)
    assert (code, err) == (0, "")
    assert "P+Q" in out and "recursive" in out and "input" in out
    assert out.strip().splitlines()[-1] == (
        "3 tasks (1 recursive, 1 input), 3 edges, 3 levels, 4 rules")


def test_graph_dot_file(program_file, tmp_path, capsys):
    dot = tmp_path / "g.dot"
    code, out, err = run_cli(["graph", str(program_file), "--json", "--dot", str(dot)], capsys)
    # With --json the note of what was written goes to stderr, so stdout stays pure JSON.
    assert code == 0 and err.startswith(f"DOT written to {dot} (3 tasks, 3 edges;")
    assert json.loads(out)["levels"] == 3
    text = dot.read_text()
    assert text.startswith("digraph levelflow {") and text.rstrip().endswith("}")
    assert 't1 [label="P+Q\\nlevel 1", peripheries=2];' in text
    assert sorted(line.strip() for line in text.splitlines() if "->" in line) == [
        "t0 -> t1;", "t0 -> t2;", "t1 -> t2;"]


def test_graph_dot_unwritable_is_one_line(program_file, tmp_path, capsys):
    target = tmp_path / "no" / "such" / "dir" / "g.dot"
    code, out, err = run_cli(["graph", str(program_file), "--dot", str(target)], capsys)
    assert code == 1
    assert err == f"{target}: error: cannot write DOT file: No such file or directory\n"
