"""An epoch as a job trace: the tasks its change activated, who activated whom, their times."""

from __future__ import annotations

from levelflow.engine.incremental import IncrementalSession
from levelflow.tasks import build_tasks, parse_program
from levelflow.traces import check_schedule, dump_trace, load_trace

BRANCHES = """
.decl a(x:number)
.input a
.decl b(x:number)
.input b
.decl a2(x:number)
a2(x) :- a(x).
.decl b2(x:number)
b2(x) :- b(x).
.decl both(x:number)
both(x) :- a2(x), b2(x).
.decl big(x:number)
big(x) :- a2(x), x > 100.
.decl after(x:number)
after(x) :- both(x).
.output after
"""


def _session(spark, tmp_path, jobs=1):
    pt = build_tasks(parse_program(BRANCHES, "branches.dl"))
    facts = tmp_path / "f"
    facts.mkdir()
    (facts / "a.facts").write_text("1\n2\n")
    (facts / "b.facts").write_text("2\n")
    return pt, IncrementalSession.bootstrap(spark, pt, facts, mode="incremental", jobs=jobs)


def test_the_epoch_trace_records_exactly_what_the_change_activated(spark, tmp_path):
    pt, session = _session(spark, tmp_path)
    session.insert("a", (3,))  # a2 gains 3; `both` and `big` run and stay as they were
    result = session.commit()
    trace = result.trace
    ids = {pt.task_of(n).id: n for n in ("a", "b", "a2", "b2", "both", "big", "after")}
    name = {v: n for v, n in ids.items()}
    assert [name[v] for v in trace.initial] == ["a"]
    active = {name[v] for v, on in enumerate(trace.active_set()) if on}
    assert active == set(result.strategies) == {"a", "a2", "both", "big"}
    assert {name[v]: {name[c] for c in cs} for v, cs in trace.activations.items()} == {
        "a": {"a2"}, "a2": {"both", "big"}, "both": set(), "big": set()}
    assert all((trace.durations[v] > 0) == (n in active) for v, n in name.items())
    path = tmp_path / "epoch1.json"
    dump_trace(trace, path)
    back = load_trace(path)  # checks the trace against the jobtrace/1 rules
    assert back.initial == trace.initial and back.activations == trace.activations
    assert back.name == "branches-epoch1"
    assert sorted(name[v] for v, *_ in result.schedule) == sorted(active)
    assert check_schedule(trace, result.schedule) == []  # the spec's validity rule


def test_two_workers_record_a_valid_schedule(spark, tmp_path):
    _, session = _session(spark, tmp_path, jobs=2)
    session.insert("a", (2,))
    session.remove("a", (1,))
    session.insert("b", (1,))
    result = session.commit()
    assert {slot for _, slot, _, _ in result.schedule} <= {0, 1}
    assert len(result.schedule) == result.ran
    assert check_schedule(result.trace, result.schedule) == []


def test_an_epoch_tells_the_live_display_what_starts_and_finishes(spark, tmp_path):
    from levelflow.engine.progress import Progress

    class Recording(Progress):
        def __init__(self):
            self.events = []

        def activated(self, tasks):
            self.events += [("activated", v) for v in tasks]

        def started(self, task):
            self.events.append(("started", task))

        def finished(self, task, seconds):
            self.events.append(("finished", task))

    pt, session = _session(spark, tmp_path)
    session.insert("a", (3,))
    seen = Recording()
    result = session.commit(progress=seen)
    ran = {pt.task_of(n).id for n in result.strategies}
    for kind in ("activated", "started", "finished"):
        assert {v for k, v in seen.events if k == kind} == ran, kind
    for v in ran:  # each task: activated, then started, then finished
        order = [k for k, u in seen.events if u == v]
        assert order == ["activated", "started", "finished"], (v, order)
