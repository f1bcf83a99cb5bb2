"""Every request to `levelflow serve` gets an HTTP answer (issue 42): an error no check foresaw
is a 500 with one line and its stack on the server's log, and the known cases are 4xx: a NUL
in `?facts=`, a record nested past the reader's depth (in a diff over HTTP, and in `update
--insert`, which printed a 3,000-line traceback). Each case checks the state did not move.
"""

from __future__ import annotations

import io

import pytest
from test_serve import Served

from levelflow.engine.incremental import IncrementalSession, StateDir
from levelflow.engine.incremental.updates import UpdateError, parse_diff
from levelflow.tasks import build_tasks, parse_program
from levelflow.tasks.record_values import MAX_DEPTH

LISTS = """
.type L = [h: number, t: L]
.decl lists(l: L)
.input lists
.decl heads(h: number)
.output heads
heads(h) :- lists([h, _]).
"""


def nested(depth: int, top: int = 1) -> str:
    """Return a list of `depth` records in Soufflé's text form: [top, [1, [1, ... nil]]]."""
    return f"[{top}, " + "[1, " * (depth - 1) + "nil" + "]" * depth


@pytest.fixture(scope="module")
def lists_server(spark, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("errors")
    (tmp / "facts").mkdir()
    (tmp / "facts" / "lists.facts").write_text("[2, [3, nil]]\n")
    (tmp / "lists.dl").write_text(LISTS)
    state = tmp / "state"
    IncrementalSession.bootstrap(spark, tmp / "lists.dl", tmp / "facts", state).close()
    log = io.StringIO()
    served = Served(spark, state, log=log, factdir=tmp / "facts")
    yield served, state, log, tmp
    served.close()


def unchanged(served, state, before: int) -> None:
    assert StateDir(state).current() == before == served.session.epoch
    assert not served.session.pending


def test_the_diff_reader_refuses_a_record_past_its_depth_in_one_line():
    program = build_tasks(parse_program(LISTS, "lists.dl")).program
    ops = parse_diff(program, f"+lists({nested(MAX_DEPTH)})\n", "d.diff")
    assert len(ops) == 1 and ops[0].row[0].count("[") == MAX_DEPTH
    with pytest.raises(UpdateError) as e:
        parse_diff(program, f"// deep\n+lists({nested(600)})\n", "d.diff")
    text = str(e.value)
    assert text.startswith("d.diff:2: error: ") and "\n" not in text
    assert text.endswith(f"records or ADTs nested deeper than {MAX_DEPTH}")


def test_a_record_600_deep_over_http_is_a_400_and_100_deep_applies(lists_server):
    served, state, _, _ = lists_server
    before = served.session.epoch
    status, text = served.request("POST", "/epoch", f"+lists({nested(600)})\n")
    assert status == 400 and text.count("\n") == 1, text
    assert text.startswith("request:1: error: ") and f"nested deeper than {MAX_DEPTH}" in text
    unchanged(served, state, before)
    # As deep as the reader takes: applied, and written back as it was read.
    status, text = served.request("POST", "/epoch", f"+lists({nested(MAX_DEPTH, 7)})\n")
    assert status == 200, text
    assert served.request("GET", "/relations/heads") == (200, "2\n7\n")
    status, text = served.request("GET", "/relations/lists")
    assert status == 200 and sorted(text.splitlines()) == sorted(
        ["[2, [3, nil]]", nested(MAX_DEPTH, 7)])


def test_update_insert_of_a_record_600_deep_is_one_line(lists_server, tmp_path, cli):
    # Refused while reading the diff, before Spark starts.
    _, state, _, _ = lists_server
    before = StateDir(state).current()
    diff = tmp_path / "deep.diff"
    diff.write_text(f"+lists({nested(600)})\n")
    code, out, err = cli(["update", state, "--insert", diff])
    assert code == 1 and out == "" and err.count("\n") == 1, err
    assert err.startswith(f"{diff}:1: error: ") and "Traceback" not in err
    assert StateDir(state).current() == before


def test_a_nul_in_facts_is_a_400(lists_server):
    served, state, _, _ = lists_server
    before = served.session.epoch
    status, text = served.request("POST", "/program?facts=a%00b",
                                  LISTS + ".decl more(x: number)\n.input more\n")
    assert status == 400 and text == "request: error: facts='a\\x00b' holds a NUL character\n"
    unchanged(served, state, before)


def test_an_unforeseen_error_is_a_500_with_its_stack_on_the_log(lists_server, monkeypatch):
    served, state, log, _ = lists_server
    before = served.session.epoch

    def broken(*args):
        raise ZeroDivisionError("division by zero in a place no check foresaw")

    for method, path, name in [("GET", "/status", "status"),
                               ("POST", "/epoch", "epoch_request")]:
        log.truncate(0)
        with monkeypatch.context() as m:
            m.setattr(served.service, name, broken)
            status, text = served.request(method, path, "+lists(nil)\n" if method == "POST"
                                          else None)
        assert status == 500 and text == ("error: ZeroDivisionError: division by zero in a "
                                          "place no check foresaw\n")
        logged = log.getvalue()
        assert f"{method} {path} HTTP/1.1" in logged and "Traceback" in logged
        assert "in broken" in logged and logged.rstrip().endswith(
            "ZeroDivisionError: division by zero in a place no check foresaw")
    unchanged(served, state, before)
    assert served.request("GET", "/status")[0] == 200  # and it serves on


def test_an_epoch_past_max_tuples_is_a_422_and_applies_nothing(lists_server, monkeypatch):
    # A bound of the server (--max-tuples) refuses the epoch's work: the request's fault, not
    # the server's, so a 4xx naming the task; the state stays where it was.
    served, state, _, _ = lists_server
    before = served.session.epoch
    monkeypatch.setattr(served.session, "max_tuples", 2)
    status, text = served.request("POST", "/epoch", "+lists([5, nil])\n+lists([6, nil])\n")
    assert status == 422 and "(--max-tuples 2)" in text and text.count("\n") == 1, text
    unchanged(served, state, before)
