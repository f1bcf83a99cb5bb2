"""Soufflé's components as its documentation (souffle-lang.github.io/components) and its
instantiation (ComponentInstantiation.cpp) define them, run end to end.

Every example of the documentation page, each with the result the page states or, where it
states none, derived here by hand; then the shapes the documentation implies: an instance's type
named `inst.T` outside it, a base's relations used by a derived component, `.override` with
clauses that reach the overridden relation from a component instantiated inside the base, type
parameters through several levels, components found through bases and enclosing scopes.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from lowered import check_lowered, rows_of, write_facts

from levelflow.engine.evaluate import evaluate_program
from levelflow.tasks import DatalogError, build_tasks, parse_program

sys.path.insert(0, str(Path(__file__).parent))
import naive_datalog  # noqa: E402


def run(spark, tmp_path: Path, text: str, expected: dict[str, set], facts=None):
    """Run `text` on `facts` from scratch on the engine and on the naive reference; each
    relation of `expected` must equal it in both. Return the program's tasks."""
    pt = build_tasks(parse_program(text, "t.dl"))
    write_facts(tmp_path, facts or {})
    ref = naive_datalog.evaluate(pt, tmp_path)
    got = evaluate_program(spark, pt, tmp_path)
    for name, rows in expected.items():
        assert ref[name] == rows, f"reference {name}: {sorted(ref[name])}"
        assert rows_of(got[name]) == rows, f"engine {name}: {sorted(rows_of(got[name]))}"
    return pt


# -- the examples of the documentation page -----------------------------------------------------

def test_docs_two_instances_and_a_fact_added_outside(spark, tmp_path):
    text = """
.comp MyComponent {
    .type myType = number
    .decl TheAnswer(x:myType)
    TheAnswer(42).
}
.init myInstance1 = MyComponent
.init myInstance2 = MyComponent
myInstance2.TheAnswer(33).
.decl Test(x:number)
Test(x) :- myInstance1.TheAnswer(x).
Test(x) :- myInstance2.TheAnswer(x).
.output Test
"""
    pt = run(spark, tmp_path, text, {"Test": {(42,), (33,)},
                                     "myInstance1.TheAnswer": {(42,)},
                                     "myInstance2.TheAnswer": {(42,), (33,)}})
    # the page's expansion: one relation per instance, nothing else
    assert set(pt.program.decls) == {"Test", "myInstance1.TheAnswer", "myInstance2.TheAnswer"}


def test_docs_clauses_of_relations_declared_outside_the_component(spark, tmp_path):
    # The page: Count's clauses name R, declared by the enclosing A, and A's rule names the
    # global Out; expanded to myA.R(1). myA.R(x+1) :- myA.R(x), x < 10. Out(x) :- myA.R(x).
    text = """
.decl Out(x:number)
.comp A {
   .decl R(x:number)
   .comp Count {
       R(1).
       R(x+1):- R(x), x<10.
   }
   .init myCount = Count
   Out(x) :- R(x).
}
.init myA = A
.output Out
"""
    ten = {(x,) for x in range(1, 11)}
    pt = run(spark, tmp_path, text, {"Out": ten, "myA.R": ten})
    assert set(pt.program.decls) == {"Out", "myA.R"}


def test_docs_type_parameters(spark, tmp_path):
    text = """
.comp ParamComponent<myType> {
    .decl TheAnswer(x:myType)
    TheAnswer(42).
    .output TheAnswer
}
.init numberInstance = ParamComponent<number>
.init floatInstance = ParamComponent<float>
"""
    pt = run(spark, tmp_path, text, {"numberInstance.TheAnswer": {(42,)},
                                     "floatInstance.TheAnswer": {(42.0,)}})
    assert pt.program.decls["numberInstance.TheAnswer"].types == ("number",)
    assert pt.program.decls["floatInstance.TheAnswer"].types == ("float",)
    assert {io.relation for io in pt.program.output_directives} == {
        "numberInstance.TheAnswer", "floatInstance.TheAnswer"}


@pytest.mark.parametrize(("selector", "value"), [("One", 1), ("Two", 2)])
def test_docs_a_type_parameter_names_the_component_to_instantiate(spark, tmp_path, selector,
                                                                  value):
    # One and Two are defined inside Case: the parameter is resolved where `.init` is written
    text = f"""
.decl R(x:number)
.comp Case<Selector> {{
   .comp One {{
     R(1).
   }}
   .comp Two {{
     R(2).
   }}
   .init selection = Selector
}}
.init myCase = Case<{selector}>
.output R
"""
    run(spark, tmp_path, text, {"R": {(value,)}})


def test_docs_inheritance(spark, tmp_path):
    # The page's expansion: .type mySub.myNumber, mySub.TheAnswer, mySub.WhatIsTheAnswer. The
    # instance's type is named outside it as mySub.myNumber.
    text = """
.comp Base {
    .type myNumber = number
    .decl TheAnswer(x:myNumber)
    TheAnswer(42).
}
.comp Sub  : Base {
    .decl WhatIsTheAnswer(n:myNumber)
    WhatIsTheAnswer(n) :- TheAnswer(n).
    .output WhatIsTheAnswer
}
.init mySub = Sub
.decl Outside(n: mySub.myNumber)
Outside(n + 1) :- mySub.WhatIsTheAnswer(n).
"""
    pt = run(spark, tmp_path, text, {"mySub.TheAnswer": {(42,)},
                                     "mySub.WhatIsTheAnswer": {(42,)}, "Outside": {(43,)}})
    assert set(pt.program.decls) == {"mySub.TheAnswer", "mySub.WhatIsTheAnswer", "Outside"}


def test_docs_override_discards_the_base_facts_and_rules(spark, tmp_path):
    # The page: Sub discards R(1). and R(x+1) :- R(x), x < 5.; mySub.R is R(2) and x+1 below
    # 4: {2, 3, 4}. An instance of Base keeps them: {1, ..., 5}.
    text = """
.comp Base {
    .decl R(x:number) overridable
    R(1).
    R(x+1) :- R(x), x < 5.
    .output R
}
.comp Sub : Base {
    .override R
    R(2).
    R(x+1) :- R(x), x < 4.
}
.init mySub = Sub
.init myBase = Base
"""
    run(spark, tmp_path, text, {"mySub.R": {(2,), (3,), (4,)},
                                "myBase.R": {(x,) for x in range(1, 6)}})


def test_docs_a_more_precise_analysis_by_override(spark, tmp_path):
    # The page's points-to example, its relations declared with types (the page leaves them
    # out): the precise instance drops constants that name classes or simple names.
    text = """
.decl StringConstant(h:symbol)
.decl ClassNameStringConstant(h:symbol)
.decl SimpleNameStringConstant(h:symbol)
StringConstant("a"). StringConstant("b"). StringConstant("c").
ClassNameStringConstant("b"). SimpleNameStringConstant("c").
.comp AbstractPointsto{
    .decl HeapAllocationMerge(heap:symbol,mergeHeap:symbol) overridable
    HeapAllocationMerge(heap,"<<string-constant>>") :-
        StringConstant(heap).
}
.comp PrecisePointsto : AbstractPointsto{
    .override HeapAllocationMerge
    HeapAllocationMerge(heap,"<<string-constant>>") :-
        StringConstant(heap),
        !ClassNameStringConstant(heap),
        !SimpleNameStringConstant(heap).
}
.init precise_pointsto = PrecisePointsto
.init abstract_pointsto = AbstractPointsto
"""
    merged = "<<string-constant>>"
    run(spark, tmp_path, text, {
        "precise_pointsto.HeapAllocationMerge": {("a", merged)},
        "abstract_pointsto.HeapAllocationMerge": {("a", merged), ("b", merged), ("c", merged)}})


def test_docs_type_parameters_passed_to_the_base_and_as_the_base(spark, tmp_path):
    text = """
.comp A<T> { .decl a(x:T) }
.comp B<K> : A<K> { .decl b(x:K)  b(x) :- a(x). }
.init bs = B<symbol>
bs.a("s").
.comp E { .decl r(x:number)  r(7). }
.comp C<T> : T { .decl s(x:number)  s(x + 1) :- r(x). }
.init c = C<E>
"""
    pt = run(spark, tmp_path, text, {"bs.b": {("s",)}, "c.r": {(7,)}, "c.s": {(8,)}})
    assert pt.program.decls["bs.a"].types == ("symbol",)


def test_docs_a_component_parameter_instantiated_inside(spark, tmp_path):
    # Reachability<TGraph> instantiates its parameter; NumberGraph : Graph<number> stands for
    # Graph<number>, which cannot be an argument. The instance makes its own copy of the graph.
    text = """
.comp Graph<TNode> {
    .decl edge(u:TNode, v:TNode)
}
.comp Reachability<TGraph> {
    .init graph = TGraph
    .decl reach(u:number, v:number)
    reach(u, v) :- graph.edge(u, v).
    reach(u, w) :- reach(u, v), graph.edge(v, w).
}
.comp NumberGraph : Graph<number> {
    edge(1, 2).
    edge(2, 3).
}
.init reach = Reachability<NumberGraph>
.init g = Graph<number>
g.edge(5, 6).
"""
    run(spark, tmp_path, text, {"reach.graph.edge": {(1, 2), (2, 3)},
                                "reach.reach": {(1, 2), (1, 3), (2, 3)}, "g.edge": {(5, 6)}})


# -- the shapes the documentation implies --------------------------------------------------------

def test_an_instance_type_named_outside_it(spark, tmp_path):
    text = """
.comp C {
  .type T <: number
  .type Pair = [a: T, b: T]
  .decl r(x: T)
  .input r
}
.init c = C
.decl q(x: c.T)
q(x) :- c.r(x), x > 1.
.type Wrapped = [v: c.T]
.decl w(p: Wrapped)
w([x]) :- q(x).
.decl unwrapped(x: number)
unwrapped(x) :- w([x]).
.decl pairs(p: c.Pair)
pairs([x, y]) :- c.r(x), c.r(y), x < y.
.decl sums(s: number)
sums(x + y) :- pairs([x, y]).
.decl cast(x: c.T)
cast(as(n, c.T)) :- n = 7.
"""
    run(spark, tmp_path, text, {"q": {(2,), (3,)}, "unwrapped": {(2,), (3,)},
                                "sums": {(3,), (4,), (5,)}, "cast": {(7,)}},
        {"c.r": {(1,), (2,), (3,)}})


def test_a_relation_and_a_type_of_one_name_and_a_base_used_by_the_derived(spark, tmp_path):
    # `.decl node(n: node)`: the relation is the instance's, the type the global one. Graph
    # writes, reads, negates and counts the relations its base DiGraph declares.
    text = """
.symbol_type node
.comp DiGraph {
  .decl node(n: node)
  .decl edge(a: node, b: node)
  .input edge
  node(x) :- edge(x, _).
  node(x) :- edge(_, x).
  .decl reachable(a: node, b: node)
  reachable(x, y) :- edge(x, y).
  reachable(x, z) :- reachable(x, y), edge(y, z).
}
.comp Graph : DiGraph {
  edge(x, y) :- edge(y, x).
  .decl leaf(n: node)
  leaf(x) :- node(x), 1 = count : { edge(x, _) }.
  .decl apart(a: node, b: node)
  apart(x, y) :- node(x), node(y), !reachable(x, y).
  .output leaf, apart, node
}
.init g = Graph
"""
    abc, de = ("a", "b", "c"), ("d", "e")
    apart = {(x, y) for x in abc for y in de} | {(y, x) for x in abc for y in de}
    run(spark, tmp_path, text, {"g.node": {(x,) for x in abc + de},
                                "g.leaf": {("a",), ("c",), ("d",), ("e",)}, "g.apart": apart},
        {"g.edge": {("a", "b"), ("b", "c"), ("d", "e")}})


# A component instantiated inside the base writes R, which Sub overrides: Soufflé instantiates
# it with nothing overridden and places its clause in the instance that declares R, so it stays;
# the clause Base writes to R itself is dropped.
OVERRIDE_THROUGH_NESTED = """
.decl src(x:number)
.input src
.comp Base {
  .decl R(x:number) overridable
  .comp Seed { R(x) :- src(x), x < 10. }
  .init seed = Seed
  R(x + 100) :- src(x).
  .decl twice(x:number)
  twice(2 * x) :- R(x).
}
.comp Sub : Base {
  .override R
  R(x + 1000) :- src(x).
}
.init s = Sub
.init b = Base
.output s.R, s.twice, b.R
"""


def test_override_keeps_a_clause_from_a_component_instantiated_in_the_base(spark, tmp_path):
    check_lowered(spark, tmp_path, OVERRIDE_THROUGH_NESTED, {"src": {(1,), (5,), (20,)}}, {
        "s.R": {(1,), (5,), (1001,), (1005,), (1020,)},
        "s.twice": {(2,), (10,), (2002,), (2010,), (2040,)},
        "b.R": {(1,), (5,), (101,), (105,), (120,)}})


def test_override_reaches_the_bases_of_bases(spark, tmp_path):
    # Leaf overrides R of Base through Mid : Base: both Base's fact and Mid's are dropped
    text = """
.comp Base { .decl R(x:number) overridable  R(1). }
.comp Mid : Base { R(2). }
.comp Leaf : Mid { .override R  R(3). }
.init l = Leaf
.init m = Mid
"""
    run(spark, tmp_path, text, {"l.R": {(3,)}, "m.R": {(1,), (2,)}})


def test_components_through_several_levels(spark, tmp_path):
    # A component parameter passed through two levels (Top<Y> -> Mid<X> -> .init inner = X), a
    # type parameter through an instance and a base (C<V> -> B<U> : A<U>), a component found
    # in a base's scope (Helper), several bases (`: P, Q` and `: P : Q`), and a component
    # defined at the top level whose clauses write the relation of the instance enclosing it.
    text = """
.comp Leaf { .decl v(x:number)  v(1). }
.comp Mid<X> { .init inner = X }
.comp Top<Y> { .init m = Mid<Y> }
.init t = Top<Leaf>

.comp A<T> { .decl a(x:T) }
.comp B<U> : A<U> { }
.comp C<V> { .init b = B<V>  b.a("z"). }
.init c = C<symbol>

.comp Base { .comp Helper { .decl h(x:number)  h(3). } }
.comp Derived : Base { .init hh = Helper }
.init d = Derived

.comp P { .decl p(x:number)  p(10). }
.comp Q { .decl q(x:number)  q(20). }
.comp PQ : P, Q { .decl pq(x:number)  pq(x + y) :- p(x), q(y). }
.comp QP : Q : P { .decl qp(x:number)  qp(x - y) :- q(x), p(y). }
.init pq = PQ
.init qp = QP

.decl Out(x:number)
.comp Count { R(1).  R(x + 1) :- R(x), x < 3. }
.comp Holder { .decl R(x:number)  .init count = Count  Out(x * 10) :- R(x). }
.init holder = Holder
"""
    pt = run(spark, tmp_path, text, {
        "t.m.inner.v": {(1,)}, "c.b.a": {("z",)}, "d.hh.h": {(3,)}, "pq.pq": {(30,)},
        "qp.qp": {(10,)}, "holder.R": {(1,), (2,), (3,)}, "Out": {(10,), (20,), (30,)}})
    assert pt.program.decls["c.b.a"].types == ("symbol",)


def test_run_and_update_from_the_cli(cli_spark, cli, tmp_path):
    program = tmp_path / "reach.dl"
    program.write_text("""
.comp Graph<N> {
  .decl edge(u:N, v:N)
  .input edge
}
.comp Reachability<G> {
  .init graph = G
  .decl reach(u:number, v:number)
  reach(u, v) :- graph.edge(u, v).
  reach(u, w) :- reach(u, v), graph.edge(v, w).
  .output reach
}
.comp NumberGraph : Graph<number> { }
.init r = Reachability<NumberGraph>
""")
    write_facts(tmp_path / "f", {"r.graph.edge": {(1, 2), (2, 3)}})
    code, out, err = cli(["run", program, "-F", tmp_path / "f", "-D", tmp_path / "out",
                          "--state", tmp_path / "state", "-q"])
    assert code == 0, err
    assert (tmp_path / "out" / "r.reach.csv").read_text().split("\n") == [
        "1\t2", "1\t3", "2\t3", ""]
    (tmp_path / "change.diff").write_text("+r.graph.edge(3, 4)\n-r.graph.edge(1, 2)\n")
    code, out, err = cli(["update", tmp_path / "state", "--insert", tmp_path / "change.diff",
                          "-D", tmp_path / "out2"])
    assert code == 0, err
    # edges 2->3, 3->4
    assert (tmp_path / "out2" / "r.reach.csv").read_text().split("\n") == [
        "2\t3", "2\t4", "3\t4", ""]


@pytest.mark.parametrize(("text", "where", "fragment"), [
    (".comp A { .init a = A }\n.init x = A", "1:11", "component instances nest deeper than 32"),
    ("".join(f".comp C{k} {{ .init x = C{k + 1}  .init y = C{k + 1} }}\n" for k in range(16))
     + ".comp C16 { }\n.init top = C0", "16:28", "the components make more than 10000 instances"),
    ("".join(f".comp C{k + 1} : C{k} {{ }}\n" for k in range(80)) + ".comp C0 { }\n"
     ".init x = C80", "15:1", "components inherit through more than 64 levels"),
    (".comp O<X> { .comp In { .init y = X } }", "1:25", "component 'X' is not defined"),
    (".comp C { .decl r(x:number) }\n.comp D { .init c = C<number> }", "2:11",
     "component 'C' takes 0 type arguments, given 1"),
])
def test_instantiation_limits_and_errors_are_one_line(text, where, fragment):
    with pytest.raises(DatalogError) as e:
        parse_program(text, "t.dl")
    assert str(e.value).startswith(f"t.dl:{where}") and fragment in str(e.value), str(e.value)
