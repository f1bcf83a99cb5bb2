"""Path atoms `[EXPR](a, b)`: parsing, expansion into tasks, and each operator against networkx.

The reference computes each expression as a set of pairs with plain Python and networkx
(transitive_closure for `+`); the engine must give the same pairs under the local and the
partitioned plan, and the native closure the same pairs and ranks as the semi-naive rule.
"""

from __future__ import annotations

import random

import networkx as nx
import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from levelflow.engine.plans.closure import bfs_layers, run_closure
from levelflow.engine.plans.fixpoint import run_task
from levelflow.engine.runner import run_program
from levelflow.tasks import DatalogError, build_tasks, parse_program

DECLS = """
.decl a(x:number, y:number)
.decl b(x:number, y:number)
.decl c(x:number, y:number)
.input a
.input b
.input c
"""

# name -> expression; each becomes `name(x, y) :- [expr](x, y).`
EXPRESSIONS = {
    "q_rel": "a", "q_inv": "^a", "q_seq": "a . b", "q_alt": "a | ^b", "q_plus": "a+",
    "q_star": "b*", "q_opt": "c?", "q_nested": "(a | b . ^c)+ . c*",
    "q_inv_group": "^(a . b+)", "q_double": "(a+)+",
}


def program_text() -> str:
    lines = [DECLS]
    for name, expr in EXPRESSIONS.items():
        lines.append(f".decl {name}(x:number, y:number)\n{name}(x, y) :- [{expr}](x, y).\n"
                     f".output {name}\n")
    return "".join(lines)


def reference(expr: str, edges: dict[str, set]) -> set:
    """Return expr's pairs computed directly (networkx for closures)."""
    from levelflow.tasks.lexer import Source, tokenize
    from levelflow.tasks.parser import _Parser
    from levelflow.tasks.path_syntax import path_alt

    src = Source(expr + "]", "<ref>")
    toks, _ = tokenize(src)
    return _eval(path_alt(_Parser(src, toks)), edges)


def _nodes(expr, edges) -> set:
    from levelflow.tasks.regpath import relations_in

    return {v for r in relations_in(expr) for pair in edges[r] for v in pair}


def _eval(expr, edges) -> set:
    op, parts = expr.op, expr.parts
    if op == "rel":
        return set(edges[expr.name])
    got = [_eval(p, edges) for p in parts]
    if op == "^":
        return {(y, x) for x, y in got[0]}
    if op == "|":
        return set().union(*got)
    if op == ".":
        out = got[0]
        for nxt in got[1:]:
            out = {(x, z) for x, y in out for y2, z in nxt if y == y2}
        return out
    g = nx.DiGraph(list(got[0]))
    plus = set(nx.transitive_closure(g, reflexive=False).edges())
    ident = {(v, v) for v in _nodes(expr, edges)}
    return plus if op == "+" else plus | ident if op == "*" else got[0] | ident


def random_edges(seed: int, nodes: int = 9, per_label: int = 11) -> dict[str, set]:
    rng = random.Random(seed)
    return {label: {(rng.randrange(nodes), rng.randrange(nodes)) for _ in range(per_label)}
            for label in "abc"}


def write_facts(factdir, edges) -> None:
    factdir.mkdir(parents=True, exist_ok=True)
    for label, pairs in edges.items():
        (factdir / f"{label}.facts").write_text("".join(f"{x}\t{y}\n" for x, y in sorted(pairs)))


# -- parsing ------------------------------------------------------------------------------------

def texts_of(texts: dict, expr: str) -> str:
    return next(name for name, text in texts.items() if text == expr)


def test_expansion_makes_closure_tasks_and_shares_subexpressions():
    pt = build_tasks(parse_program(program_text(), "paths.dl"))
    closures = [t for t in pt.tasks if t.closure]
    assert closures and all(t.recursive and len(t.rules) == 2 for t in closures)
    texts = dict(pt.program.paths)
    assert list(texts.values()).count("a+") == 1  # `a+` and `(a+)+` share one closure
    # `q_plus(x, y) :- [a+](x, y).` is q_plus's only rule: q_plus itself is the closure
    assert texts["q_plus"] == "a+" and pt.task_of("q_plus").closure
    assert {name for name in texts if not name.startswith("@")} == {"q_plus", "q_double"}
    assert pt.task_of("q_double").reads_from == ["q_plus"]  # (a+)+ : the closure of q_plus
    # `^(a . b+)` is `^b+ . ^a`: inverses pushed down onto the relations; the chain itself is
    # inlined into the view's rule (fresh variables), so only the closure is generated
    assert "^b+" in texts.values()
    (rule,) = [r for r in pt.program.rules if r.heads[0].relation == "q_inv_group"]
    assert [(a.relation, [t.name for t in a.args]) for _, a, _ in rule.body_atoms()] == [
        (texts_of(texts, "^b+"), ["x", "1p"]), ("a", ["y", "1p"])]
    # `a | ^b` at the top of a view: one rule per alternative, no generated relation
    assert len([r for r in pt.program.rules if r.heads[0].relation == "q_alt"]) == 2


@pytest.mark.parametrize("body,where,what", [
    ("[a . ](x, y)", "3:17", "expected a relation name, '^' or '('"),
    ("[a b](x, y)", "3:15", "expected '.', '|', '+', '*', '?' or ']'"),
    ("[nope+](x, y)", "3:13", "relation 'nope' is not declared"),
    ("[a](x)", "3:17", "a path atom takes two arguments"),
    ("[(a | b](x, y)", "3:19", "expected ')'"),
    ("[t](x, y)", "3:13", "relation 't' has arity 3"),
])
def test_malformed_expressions_name_line_and_column(body, where, what):
    text = (".decl a(x:number, y:number)\n.decl b(x:number, y:number) .decl t(x:number, "
            f"y:number, z:number) .decl r(x:number, y:number)\nr(x, y) :- {body}.\n")
    with pytest.raises(DatalogError) as e:
        parse_program(text, "bad.dl")
    assert str(e.value).startswith(f"bad.dl:{where}: error: ") and what in str(e.value)


@pytest.mark.parametrize("run", ["++", "??", "**", "+*", "*+", "?+", "+?", "*?", "?*", "+?+"])
def test_a_run_of_postfix_operators_means_the_operators_nested(run):
    # `a+?` is one operator (`a*`) after parsing; the parenthesized nesting is evaluated
    # operator by operator, so the collapse rule is checked against networkx
    nested = "(" * (len(run) - 1) + "a" + run[0] + "".join(")" + op for op in run[1:])
    for seed in range(4):
        edges = random_edges(seed)
        assert reference("a" + run, edges) == reference(nested, edges), (run, seed)


def test_hundreds_of_postfix_operators_are_one_operator():
    ops = "+" + "**" * 300
    pt = build_tasks(parse_program(DECLS + f".decl r(x:number, y:number)\nr(x, y) :- [a{ops}]"
                                   "(x, y).\n.output r\n", "deep.dl"))
    assert sorted(text for _, text in pt.program.paths) == ["a*", "a+", "nodes(a)"]


@pytest.mark.parametrize("shape", [
    "({e} | a)*", "({e} . ^b)+", "^({e})", "(a . {e} | b)?", "({e})",
])
def test_deep_path_expressions_expand_or_are_refused_in_one_line(shape):
    def program(depth: int) -> str:
        expr = "a"
        for _ in range(depth):
            expr = shape.format(e=expr)
        return DECLS + f".decl r(x:number, y:number)\nr(x, y) :- [{expr}](x, y).\n"

    per_level = 2 if shape.startswith("^") else 1  # `^(` is two levels: `^` and `(`
    build_tasks(parse_program(program(48 // per_level), "deep.dl"))  # no RecursionError
    with pytest.raises(DatalogError) as e:
        parse_program(program(60), "deep.dl")
    assert str(e.value).startswith("deep.dl:9:") and "\n" not in str(e.value)
    assert "path expression nested deeper than 50 levels" in str(e.value)


@pytest.mark.parametrize("body,what", [
    ("[a . s](x, y)", "'a . s': 'a' ends at number but 's' starts at symbol"),
    ("[a | s](x, y)", "'a | s': 'a' goes number -> number but 's' goes symbol -> symbol"),
    ("[(a . m)+](x, y)", "'(a . m)+': 'a . m' goes number -> symbol, so it cannot repeat"),
    ("[m?](x, y)", "'m?': its identity pairs each node of 'm' with itself, and 'm' goes "
                   "number -> symbol"),
    ("[(m . ^m)*](x, y)", "'(m . ^m)*': its identity pairs each node of 'm' with itself, "
                          "and 'm' goes number -> symbol"),
    ("a(x, y), [b . (i . s)](y, z)", "'b . i . s': 'i' ends at number but 's' starts at symbol"),
])
def test_ill_typed_expressions_name_the_expression_not_a_variable(body, what):
    text = (".type Id <: number\n.decl a(x:number, y:number) .decl b(x:Id, y:Id)\n"
            ".decl s(x:symbol, y:symbol) .decl m(x:number, y:symbol) .decl i(x:Id, y:number)\n"
            f".decl r(x:number, y:number)\nr(x, y) :- {body}.\n")
    with pytest.raises(DatalogError) as e:
        parse_program(text, "bad.dl")
    assert str(e.value).startswith("bad.dl:5:") and "\n" not in str(e.value)
    assert f"type mismatch in path expression {what}" in str(e.value)


def test_users_cannot_name_generated_relations():
    with pytest.raises(DatalogError, match="unexpected|expected"):
        parse_program(".decl @plus1(x:number, y:number)\n", "bad.dl")


# -- the native closure, without Spark -----------------------------------------------------------

def _closure_task():
    pt = build_tasks(parse_program(DECLS + ".decl p(x:number, y:number)\n"
                                   "p(x, y) :- [a+](x, y).\n"
                                   ".decl tc(x:number, y:number)\ntc(x, y) :- a(x, y).\n"
                                   "tc(x, y) :- tc(x, z), a(z, y).\n"))
    return pt, next(t for t in pt.tasks if t.closure), pt.task_of("tc")


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 12), st.integers(0, 12)), max_size=40),
       st.sampled_from([1, 2, 3]))
def test_native_closure_equals_networkx_and_semi_naive_ranks(pairs, parts):
    pt, cl, tc = _closure_task()
    decls = pt.program.decls
    edges = pl.DataFrame(pairs or None, schema={"c0": pl.Int64, "c1": pl.Int64}, orient="row")
    lower = {"a": edges.unique()}
    want = set(nx.transitive_closure(nx.DiGraph(pairs), reflexive=False).edges())
    name = cl.relations[0]
    got, ranks = set(), {}
    for index in range(parts):  # the partitioned plan's shares cover the sources once
        def share(_, df, index=index):
            return df.filter(pl.col("c0").hash(seed=7) % parts == index)
        out = run_closure(cl.rules, cl.relations, decls, lower, {}, share if parts > 1 else None)
        rows = out.relation(name, ranked=True).rows()
        assert not got & {(x, y) for x, y, _ in rows}
        got |= {(x, y) for x, y, _ in rows}
        ranks.update({(x, y): r for x, y, r in rows})
        if parts == 1:
            break
    assert got == want
    ref = run_task(tc.rules, tc.relations, decls, lower, {}).relation("tc", ranked=True)
    assert ranks == {(x, y): r for x, y, r in ref.rows()}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 15), st.integers(0, 15)), max_size=50),
       st.sampled_from([1, 2, 3]))
def test_unranked_closure_over_components_equals_networkx(pairs, parts):
    pt, cl, _ = _closure_task()
    edges = pl.DataFrame(pairs or None, schema={"c0": pl.Int64, "c1": pl.Int64}, orient="row")
    want = set(nx.transitive_closure(nx.DiGraph(pairs), reflexive=False).edges())
    got = []
    for index in range(parts):  # each share: only its own sources, each pair once
        def share(_, df, index=index):
            return df.filter(pl.col("c0").hash(seed=7) % parts == index)
        out = run_closure(cl.rules, cl.relations, pt.program.decls, {"a": edges.unique()}, {},
                          share if parts > 1 else None, ranked=False)
        assert len(out.rounds) == 1
        got += out.relation(cl.relations[0]).rows()
        if parts == 1:
            break
    assert len(got) == len(set(got)) and set(got) == want


def test_bitmap_blocks_and_sorted_visited_agree():
    rng = np.random.default_rng(5)
    from levelflow.engine.plans.closure import Adjacency

    adj = Adjacency(rng.integers(0, 300, 500), rng.integers(0, 300, 500))
    sources = np.arange(len(adj.nodes))
    one = bfs_layers(adj, sources)
    tiny = bfs_layers(adj, sources, block_cells=1 << 10)  # many blocks: the sorted path
    small = bfs_layers(adj, sources, block_cells=1 << 11)  # a few blocks: bitmap reuse
    for other in (tiny, small):
        assert len(one) == len(other)
        for (s1, t1), (s2, t2) in zip(one, other, strict=True):
            assert sorted(zip(s1, t1, strict=True)) == sorted(zip(s2, t2, strict=True))


# -- every operator on Spark -----------------------------------------------------------------------

@pytest.mark.parametrize("plan,seed", [("auto", 3), ("partitioned", 4)])
def test_operators_equal_networkx_on_random_labelled_graphs(spark, tmp_path, plan, seed):
    edges = random_edges(seed)
    write_facts(tmp_path, edges)
    pt = build_tasks(parse_program(program_text(), "paths.dl"))
    result = run_program(spark, pt, tmp_path, None, plan=plan, plan_rows=10**6)
    for name, expr in EXPRESSIONS.items():
        got = {tuple(r) for r in result.relation(name).collect()}
        assert got == reference(expr, edges), f"{name} = [{expr}]"


def test_graph_command_shows_what_each_expression_became(tmp_path, capsys):
    from levelflow.cli import main

    path = tmp_path / "p.dl"
    path.write_text(DECLS + ".decl v(x:number, y:number)\nv(x, y) :- [(a+ . ^b)*](x, y).\n")
    with pytest.raises(SystemExit) as e:
        main(["graph", str(path)])
    out = capsys.readouterr().out
    assert e.value.code == 0
    assert "@star1 = (a+ . ^b)*" in out and "@plus5 = a+" in out and "closure" in out
    path.write_text(DECLS + ".decl v(x:number, y:number)\nv(x, y) :- [a . ](x, y).\n")
    with pytest.raises(SystemExit) as e:
        main(["graph", str(path)])
    err = capsys.readouterr().err
    assert e.value.code == 1 and err.startswith(f"{path}:9:17: error: expected a relation")
