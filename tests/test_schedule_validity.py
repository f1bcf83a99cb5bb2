"""check_schedule: the validity rule of jobtrace/1 on hand-made schedules, and schedule/1 CSVs."""

from __future__ import annotations

import random

import pytest

from levelflow.traces import (
    ScheduleError,
    check_schedule,
    generate_trace,
    loads_trace,
    read_schedule,
    trace_stats,
    write_schedule,
)

#   a ──► x ──► c      initial = {a, c, d, e} and nothing activates anything, so
#   │           ▲      W = {a, c, d, e} and x never runs. c still waits for a: a is its
#   └──► d ─────┘      ancestor in G (through x, and through d). e is independent.
#   e
TRACE = loads_trace({
    "format": "jobtrace/1",
    "nodes": [{"id": "a", "duration": 2.0}, {"id": "x", "duration": 5.0},
              {"id": "c", "duration": 1.0}, {"id": "d", "duration": 1.5},
              {"id": "e", "duration": 4.0}],
    "edges": [["a", "x"], ["x", "c"], ["a", "d"], ["d", "c"]],
    "initial": ["a", "c", "d", "e"],
    "activations": {},
})
A, X, C, D, E = range(5)
VALID = [(A, 0, 0.0, 2.0), (E, 1, 0.0, 4.0), (D, 0, 2.0, 3.5), (C, 0, 3.5, 4.5)]


def test_a_valid_schedule_has_no_violations():
    assert check_schedule(TRACE, VALID) == []
    assert check_schedule(TRACE, list(reversed(VALID))) == []  # row order does not matter


def test_tolerance_allows_float_noise():
    rows = [(A, 0, 0.0, 2.0), (E, 1, 0.0, 4.0), (D, 0, 2.0 - 1e-12, 3.5), (C, 0, 3.5, 4.5)]
    assert check_schedule(TRACE, rows) == []
    rows[2] = (D, 0, 2.0 - 1e-6, 3.5)
    assert len(check_schedule(TRACE, rows)) == 2  # starts before a ends, overlaps a on proc 0


def test_missing_w_task():
    problems = check_schedule(TRACE, VALID[:3])
    assert problems == ["task 'c' is activated but never runs"]


def test_task_outside_w():
    problems = check_schedule(TRACE, VALID + [(X, 2, 2.0, 7.0)])
    assert problems == ["task 'x' runs but is not activated"]


def test_task_twice():
    problems = check_schedule(TRACE, VALID + [(E, 2, 5.0, 9.0)])
    assert problems == ["task 'e' runs twice"]


def test_unknown_task():
    assert check_schedule(TRACE, VALID + [(17, 0, 9.0, 10.0)]) == ["row 4: unknown task 17"]
    assert check_schedule(TRACE, VALID + [("zz", 0, 9.0, 10.0)]) == ["row 4: unknown task 'zz'"]


def test_start_before_a_direct_ancestor_ends():
    rows = [(A, 0, 0.0, 2.0), (E, 1, 0.0, 4.0), (D, 2, 1.0, 2.5), (C, 0, 3.5, 4.5)]
    assert check_schedule(TRACE, rows) == ["task 'd' starts at 1.0 before its ancestor 'a' ends "
                                           "at 2.0"]


def test_start_before_an_ancestor_in_g_but_not_in_h():
    # c waits for a through x, which is not in W, and for d; here d is done early but a is not.
    trace = loads_trace({
        "format": "jobtrace/1",
        "nodes": [{"id": "a", "duration": 2.0}, {"id": "x", "duration": 5.0},
                  {"id": "c", "duration": 1.0}],
        "edges": [["a", "x"], ["x", "c"]], "initial": ["a", "c"], "activations": {}})
    rows = [(0, 0, 0.0, 2.0), (2, 1, 1.0, 2.0)]
    assert check_schedule(trace, rows) == ["task 'c' starts at 1.0 before its ancestor 'a' ends "
                                           "at 2.0"]
    assert check_schedule(trace, [(0, 0, 0.0, 2.0), (2, 1, 2.0, 3.0)]) == []


def test_processor_overlap_only_in_the_serial_model():
    rows = [(A, 0, 0.0, 2.0), (E, 0, 1.0, 5.0), (D, 1, 2.0, 3.5), (C, 1, 3.5, 4.5)]
    assert check_schedule(TRACE, rows) == ["processor 0 runs 'a' (until 2.0) and 'e' (from 1.0) "
                                           "at once"]
    assert check_schedule(TRACE, rows, serial=False) == []


def test_overlap_with_a_long_task_is_seen_past_a_short_one():
    # e spans 0..4 on processor 0; a (0..2) and then d (2..3.5) also sit inside it.
    rows = [(E, 0, 0.0, 4.0), (A, 0, 0.0, 2.0), (D, 0, 2.0, 3.5), (C, 1, 3.5, 4.5)]
    problems = check_schedule(TRACE, rows)
    assert len(problems) == 2 and all("processor 0" in p for p in problems)


def test_end_before_start_and_negative_start():
    rows = [(A, 0, 0.0, 2.0), (E, 1, -1.0, 3.0), (D, 0, 2.0, 3.5), (C, 0, 3.5, 3.0)]
    assert sorted(check_schedule(TRACE, rows)) == [
        "task 'c' ends at 3.0 before it starts at 3.5",
        "task 'e' starts at -1.0, before the run starts"]


def test_zero_length_tasks_may_share_an_instant():
    trace = loads_trace({"format": "jobtrace/1",
                         "nodes": [{"id": "p", "duration": 0.0}, {"id": "q", "duration": 1.0}],
                         "edges": [], "initial": ["p", "q"]})
    assert check_schedule(trace, [(1, 0, 1.0, 2.0), (0, 0, 1.0, 1.0)]) == []


def _reference_asap(trace) -> list[tuple[int, int, float, float]]:
    """Return the unlimited-processor ASAP schedule, from explicit ancestor sets."""
    g = trace.graph
    n = len(g)
    anc = [set() for _ in range(n)]
    changed = True
    while changed:  # fixed point of anc[v] = union over parents p of anc[p] + {p}
        changed = False
        for v in range(n):
            new = set().union(*(anc[p] | {p} for p in g.parents[v])) if g.parents[v] else set()
            if new != anc[v]:
                anc[v], changed = new, True
    w = trace.active_set()
    end: dict[int, float] = {}
    for v in g.order:
        if w[v]:
            start = max((end[a] for a in anc[v] if w[a]), default=0.0)
            end[v] = start + trace.durations[v]
    return [(v, k, end[v] - trace.durations[v], end[v]) for k, v in enumerate(end)]


@pytest.mark.parametrize("seed", range(25))
def test_asap_schedules_are_valid_and_any_early_start_is_caught(seed):
    trace = generate_trace(60, 150, 6, 6, 0.6, seed=seed)
    rows = _reference_asap(trace)
    assert check_schedule(trace, rows) == []
    makespan = max((r[3] for r in rows), default=0.0)
    assert makespan == pytest.approx(trace_stats(trace)["span"])

    # Pull one task that waits on something to start a bit earlier: exactly that is reported.
    rng = random.Random(seed)
    waiting = [i for i, r in enumerate(rows) if r[2] > 1e-6]
    if waiting:
        i = rng.choice(waiting)
        v, p, s, e = rows[i]
        rows[i] = (v, p, s - 1e-6, e - 1e-6)
        problems = check_schedule(trace, rows)
        assert problems and problems[0].startswith(f"task {trace.graph.names[v]!r} starts at")


def test_ancestor_check_scales_to_ten_thousand_nodes():
    trace = generate_trace(10_000, 30_000, 40, 200, 0.7, seed=1)
    g = trace.graph
    w = trace.active_set()
    # Serial chain in topological order on one processor: valid by construction.
    rows, t = [], 0.0
    for v in g.order:
        if w[v]:
            rows.append((v, 0, t, t + trace.durations[v]))
            t += trace.durations[v]
    assert check_schedule(trace, rows) == []
    rows.reverse()  # row order must not matter
    assert check_schedule(trace, rows) == []


def test_csv_round_trip(tmp_path):
    path = tmp_path / "s.csv"
    write_schedule(VALID, TRACE, path)
    lines = path.read_text().splitlines()
    assert lines[0] == "task,processor,start,end"
    assert lines[1] == "a,0,0.0,2.0"
    assert read_schedule(path) == [("a", 0, 0.0, 2.0), ("e", 1, 0.0, 4.0), ("d", 0, 2.0, 3.5),
                                   ("c", 0, 3.5, 4.5)]
    assert read_schedule(path, TRACE) == VALID
    assert check_schedule(TRACE, read_schedule(path)) == []


@pytest.mark.parametrize("text,parts", [
    ("task,proc,start,end\n", ["line 1: expected the header"]),
    ("", ["line 1"]),
    ("task,processor,start,end\na,0,0.0\n", ["line 2: expected 4 fields"]),
    ("task,processor,start,end\na,0,0,1\nc,one,0.0,1.0\n", ["line 3: processor 'one'"]),
    ("task,processor,start,end\na,0,zero,1.0\n", ["line 2: start/end"]),
])
def test_bad_csv_is_one_line(tmp_path, text, parts):
    path = tmp_path / "s.csv"
    path.write_text(text)
    with pytest.raises(ScheduleError) as info:
        read_schedule(path)
    line = str(info.value)
    assert "\n" not in line and line.startswith(str(path))
    for part in parts:
        assert part in line


def test_csv_with_unknown_task_for_a_trace(tmp_path):
    path = tmp_path / "s.csv"
    path.write_text("task,processor,start,end\nzz,0,0.0,1.0\n")
    with pytest.raises(ScheduleError, match="line 2: unknown task 'zz'"):
        read_schedule(path, TRACE)
    with pytest.raises(ScheduleError, match="no such file"):
        read_schedule(tmp_path / "none.csv")


def test_write_failure_is_one_line(tmp_path):
    with pytest.raises(ScheduleError, match="cannot write"):
        write_schedule(VALID, TRACE, tmp_path / "no" / "dir.csv")


def test_ids_with_spaces_survive_a_csv_round_trip(tmp_path):
    from levelflow.simulator import simulate

    trace = loads_trace({"format": "jobtrace/1",
                         "nodes": [{"id": " a", "duration": 1}, {"id": "b ", "duration": 2}],
                         "edges": [[" a", "b "]], "initial": [" a"]})
    result = simulate(trace, "levelbased", 2, record_schedule=True)
    path = tmp_path / "s.csv"
    write_schedule(result.schedule, trace, path)
    rows = read_schedule(path, trace)  # ids compared exactly: " a" is not "a"
    assert sorted(r[0] for r in rows) == [0, 1]
    assert check_schedule(trace, rows) == []


def test_an_unencodable_name_is_one_line_and_leaves_no_file(tmp_path):
    trace = loads_trace({"format": "jobtrace/1", "nodes": [{"id": "a", "duration": 1}],
                         "edges": [], "initial": ["a"]})
    path = tmp_path / "s.csv"
    with pytest.raises(ScheduleError, match="is not Unicode text"):
        write_schedule([("\udc80", 0, 0.0, 1.0)], trace, path)
    assert not path.exists()
