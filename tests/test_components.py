"""Soufflé components (tasks/components.py): `.comp` with type parameters, `.init`, nested
components and instances, inheritance, `.override`, qualified names `inst.rel`; lowered to
plain relations named `inst.rel` (written to `inst.rel.csv`)."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lowered import check_lowered

from levelflow.tasks import DatalogError, build_tasks, parse_program

PROGRAM = """.comp Graph<N> {
  .decl edge(x:N, y:N)
  .decl seed(x:N)
  .decl reach(x:N, y:N) overridable
  reach(x, y) :- edge(x, y).
  reach(x, x) :- seed(x).
  reach(x, z) :- reach(x, y), edge(y, z).
}
.comp Undirected<N> : Graph<N> {
  .override reach
  .decl sym(x:N, y:N)
  sym(x, y) :- edge(x, y).
  sym(y, x) :- edge(x, y).
  reach(x, y) :- sym(x, y).
  reach(x, z) :- reach(x, y), sym(y, z).
}
.comp Pair<A, B> {
  .comp Inner<T> {
    .decl cell(v:T)
  }
  .init left = Inner<A>
  .init right = Inner<B>
  left.cell(1).
  right.cell("one").
  .decl both(a:A, b:B)
  both(x, y) :- left.cell(x), right.cell(y).
}
.init g = Graph<number>
.init u = Undirected<symbol>
.init p = Pair<number, symbol>
.decl src(x:number, y:number)
.input src
g.edge(x, y) :- src(x, y).
g.seed(9).
u.edge("a", "b").
u.edge("b", "c").
u.seed("z").
.output g.reach, u.reach
.output p.both
"""


def test_instances_are_relations_named_by_their_path():
    pt = build_tasks(parse_program(PROGRAM, "c.dl"))
    assert set(pt.program.decls) == {
        "src", "g.edge", "g.seed", "g.reach", "u.edge", "u.seed", "u.reach", "u.sym",
        "p.left.cell", "p.right.cell", "p.both"}
    assert pt.program.decls["u.edge"].types == ("symbol", "symbol")
    assert pt.program.decls["p.both"].types == ("number", "symbol")
    assert {io.file_name for io in pt.program.output_directives} == {
        "g.reach.csv", "u.reach.csv", "p.both.csv"}
    assert "g.reach" in pt.graph.names  # `levelflow graph` shows the lowered names


def test_a_type_parameter_as_the_base():
    # Soufflé's documentation: "the type parameter can be used as the base class"
    p = parse_program(".comp C<T> : T { r(2). }\n.comp E { .decl r(x:number)\n r(1). }\n"
                      ".init c = C<E>", "t.dl")
    assert sorted(r.heads[0].args[0].value for r in p.rules) == [1, 2]
    assert set(p.decls) == {"c.r"}


def test_override_drops_the_base_rules():
    p = parse_program(PROGRAM, "c.dl")
    u_reach = [r for r in p.rules if r.heads[0].relation == "u.reach"]
    assert sorted(len(r.body) for r in u_reach) == [1, 2]
    assert {a.relation for r in u_reach for a in r.body} == {"u.sym", "u.reach"}


def test_components_run_from_scratch_and_incrementally(spark, tmp_path):
    facts = {"src": {(1, 2), (2, 3), (3, 4)}}
    abc = ("a", "b", "c")
    expected = {"g.reach": {(1, 2), (2, 3), (3, 4), (1, 3), (2, 4), (1, 4), (9, 9)},
                "u.reach": {(x, y) for x in abc for y in abc},  # no ("z", "z"): overridden
                "p.both": {(1, "one")}}
    check_lowered(spark, tmp_path, PROGRAM, facts, expected)


@pytest.mark.parametrize(("text", "where", "fragment"), [
    (".init a = Nope", "1:1", "component 'Nope' is not defined"),
    (".comp C<T> { }\n.init a = C", "2:1", "component 'C' takes 1 type argument, given 0"),
    (".comp C : D { }\n.comp D : C { }\n.init a = C", "1:1",
     "component 'C' inherits from itself"),
    (".comp C : Nope { }\n.init a = C", "1:11", "component 'Nope' is not defined"),
    (".decl r(x:number)\n.override r", "2:1", "'.override' is only allowed in a component"),
    (".comp C {\n.decl r(x:number)\n", "1:1", "component 'C' has no closing '}'"),
    (".comp C {\n  .decl r(x:number)\n  r(y) :- r(x).\n}\n.init a = C", "3:5",
     "variable 'y' is not grounded"),
    (".comp C { .decl r(x:number) }\n.init a = C\n.output a.s", "3:9",
     "relation 'a.s' is not declared"),
    # Soufflé's component checks (tasks/comp_check.py), on components never instantiated too
    (".comp A { .decl r(x:number)\n r(1). }\n.comp B : A {\n .override r\n r(2). }", "4:2",
     "'.override r' in component 'B': base component 'A' does not declare it overridable "
     "(at 1:17)"),
    (".comp A { .decl r(x:number) overridable }\n.comp B : A { }\n.comp C : B {\n"
     " .decl s(x:number)\n .override s\n}", "5:2",
     "'.override s' in component 'C': the relation is declared in 'C' itself, not inherited"),
    (".comp A { }\n.comp A { }", "2:7", "component 'A' is already defined at 1:1"),
    (".decl a(x:number)\n.comp C { }\n.init a = C", "3:1",
     "instance 'a' has the name of the relation declared at 1:7"),
    (".type T <: number\n.comp T { }", "2:1",
     "component 'T' has the name of the type declared at 1:7"),
    (".comp C { }\n.init a = C\n.init a = C", "3:1",
     "instance 'a' has the name of the instance declared at 2:1"),
    (".comp C : D { }", "1:11", "component 'D' is not defined"),
    (".comp C<T> { }\n.comp D : C { }", "2:11", "component 'C' takes 1 type argument, given 0"),
    (".comp A { .decl r(x:number) }\n.comp B : A { .decl r(x:number) }\n.init b = B", "2:21",
     "relation 'b.r' is already declared at 1:11"),
])
def test_component_errors_are_one_line(text, where, fragment):
    with pytest.raises(DatalogError) as e:
        parse_program(text, "t.dl")
    assert str(e.value).startswith(f"t.dl:{where}: error: ") and fragment in str(e.value), \
        str(e.value)


PIECES = [".comp ", ".init ", ".override ", "C", "D", "a", "r", "x", "T", "<", ">", ",", ":",
          "=", "{", "}", "(", ")", ".", " ", "\n", ".decl r(x:T)", ".decl r(x:number)", "r(1).",
          "a.r(1).", "a.r", "number", "r(x) :- a.r(x).", ".output a.r", " eqrel", "#define N 1\n",
          ".type T <: number", ".decl q(x: a.T)", ".type P = [f: a.T]", " overridable",
          "R(1).", "$a.B(1)", ".type E = B {x: T}"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(PIECES), max_size=30).map("".join))
def test_fuzz_components_never_crash(text):
    try:
        build_tasks(parse_program(text, "fuzz.dl"))
    except DatalogError as e:
        assert re.match(r"^fuzz\.dl:\d+:\d+: error: [^\n]+$", str(e)), str(e)
