"""`levelflow serve`: epochs over HTTP equal from-scratch evaluation, bad requests change nothing.

The fast checks run the server in this process on a free port (the tests' SparkSession); the
kill test runs `levelflow serve` as a process that SIGKILLs itself in the middle of an epoch
(on a JVM of its own: a process killed on the tests' JVM can leave that JVM hanging), then serves
the state again and stops it with SIGTERM.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from test_incremental_properties import (
    FAMILIES,
    check_against_reference,
    random_epochs,
    start_family,
)

from levelflow.engine.incremental import IncrementalSession, StateDir
from levelflow.server import EpochService, make_server
from levelflow.tasks import build_tasks, parse_program

ROOT = Path(__file__).resolve().parent.parent
CONVERT = {"number": int, "unsigned": int, "float": float, "symbol": str}


class Served:
    """A server on a free port in a thread, over a session on `state`."""

    def __init__(self, spark, state: Path, timeout: float = 60, **limits) -> None:
        self.session = IncrementalSession.open(spark, state, mode="incremental")
        self.service = EpochService(self.session, str(state), **limits)
        self.server = make_server(self.service, "127.0.0.1", 0, request_timeout=timeout)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def request(self, method: str, path: str, body: str | bytes | None = None,
                headers: dict | None = None) -> tuple[int, str]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=300)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            resp = conn.getresponse()
            return resp.status, resp.read().decode()
        finally:
            conn.close()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.session.close()


def diff_of(ops) -> str:
    """Return the diff text of (sign, relation, row) ops."""
    return "".join(f"{'+' if s > 0 else '-'}{n}({', '.join(json.dumps(v) for v in row)})\n"
                   for s, n, row in ops)


class HttpView:
    """What check_against_reference reads, fetched over HTTP: relation() and size()."""

    def __init__(self, served: Served, spark) -> None:
        self.served, self.spark = served, spark

    def relation(self, name: str):
        decl = self.served.session.program.decls[name]
        status, text = self.served.request("GET", f"/relations/{name}")
        assert status == 200, text
        rows = [tuple(CONVERT[t](f) for t, f in zip(decl.types, line.split("\t"), strict=True))
                for line in text.splitlines()] if decl.arity else [()] * len(text.splitlines())
        assert len(rows) == len(set(rows))
        return _Rows(rows)

    def size(self, name: str) -> int:
        status, text = self.served.request("GET", f"/relations/{name}/size")
        assert status == 200, text
        return json.loads(text)["size"]


class _Rows:
    """Enough of a DataFrame for rows_of: collect()."""

    def __init__(self, rows) -> None:
        self.rows = rows

    def collect(self):
        return self.rows


def bootstrap(spark, tmp_path, family: str, seed: int):
    """Return (state dir, ProgramTasks, facts, generators, rng) of a family on random facts."""
    _, pt, facts, gens, rng = start_family(spark, tmp_path, family, seed)
    prog = tmp_path / f"{family}.dl"
    prog.write_text(FAMILIES[family][0])
    state = tmp_path / "state"
    IncrementalSession.bootstrap(spark, prog, tmp_path / "f0", state).close()
    return state, pt, facts, gens, rng


def test_epochs_over_http_match_from_scratch_across_a_restart(spark, tmp_path):
    # The server passes diffs through whatever the program (the engine's families are
    # tests/test_incremental_properties.py's): one family over HTTP.
    state, pt, facts, gens, rng = bootstrap(spark, tmp_path, "tc", 21)
    served = Served(spark, state)
    try:
        for k, ops in enumerate(random_epochs(rng, gens, facts, 4), 1):
            status, text = served.request("POST", "/epoch", diff_of(ops))
            assert status == 200, text
            answer = json.loads(text)
            assert answer["epoch"] == k and isinstance(answer["spark_jobs"], int)
            if not answer["relations"]:  # a diff that nets to nothing: checked in the driver
                assert answer["spark_jobs"] == 0, answer  # (its base index loaded by open)
            check_against_reference(HttpView(served, spark), pt, facts, tmp_path / f"r{k}")
            if k == 2:  # close, open, continue
                served.close()
                served = Served(spark, state)
                status, text = served.request("GET", "/status")
                assert status == 200 and json.loads(text)["epoch"] == 2
    finally:
        served.close()
    assert StateDir(state).current() == 4


@pytest.fixture(scope="module")
def tc_server(spark, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("serve")
    state, pt, facts, _, _ = bootstrap(spark, tmp, "tc", 23)
    served = Served(spark, state)
    yield served, state, pt, facts, tmp
    served.close()


@pytest.mark.parametrize("body,status,fragment", [
    ("+edge(1, 2)\nedge(3, 4)\n", 400, "request:2: error: a diff line starts with + or -"),
    ("+nope(1, 2)\n", 400, "request:1: error: unknown relation nope"),
    ("+edge(1, 2)\n-edge(1)\n", 400, "request:2: error: edge has arity 2, got 1 arguments"),
    ("+path(1, 2)\n", 400, "path is not an .input relation"),
    ("+edge(1, \"a\")\n", 400, "request:1: error: argument 2"),
    (b"+edge(1, 2)\xff\n", 400, "not UTF-8"),
])
def test_a_bad_epoch_is_one_line_and_applies_nothing(tc_server, body, status, fragment):
    served, state, *_ = tc_server
    before, sizes = StateDir(state).current(), served.session.snap.rows
    got, text = served.request("POST", "/epoch", body)
    assert got == status and fragment in text
    assert text.endswith("\n") and text.count("\n") == 1
    assert StateDir(state).current() == before and served.session.snap.rows == sizes
    assert not served.session.pending


@pytest.mark.parametrize("method,path,status,fragment", [
    ("GET", "/relations/nope", 404, "unknown relation 'nope'"),
    ("GET", "/relations/nope/size", 404, "unknown relation 'nope'"),
    ("GET", "/what", 404, "no endpoint GET /what"),
    ("POST", "/status", 404, "no endpoint POST /status"),
])
def test_bad_paths_are_one_line(tc_server, method, path, status, fragment):
    served = tc_server[0]
    got, text = served.request(method, path, "" if method == "POST" else None)
    assert got == status and fragment in text and text.count("\n") == 1


def test_a_post_without_length_is_refused(tc_server):
    served = tc_server[0]
    conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=60)
    conn.putrequest("POST", "/epoch")
    conn.endheaders()
    resp = conn.getresponse()
    assert resp.status == 411 and b"Content-Length" in resp.read()
    conn.close()


def test_concurrent_epochs_queue_one_at_a_time(tc_server, tmp_path):
    served, state, pt, facts, _ = tc_server
    start = StateDir(state).current()
    new = [(900 + i, 901 + i) for i in range(4)]
    answers: list[dict] = []

    def post(edge):
        status, text = served.request("POST", "/epoch", f"+edge{edge}\n")
        assert status == 200, text
        answers.append(json.loads(text))

    threads = [threading.Thread(target=post, args=(e,)) for e in new]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(a["epoch"] for a in answers) == list(range(start + 1, start + 5))
    facts["edge"] |= set(new)
    check_against_reference(HttpView(served, None), pt, facts, tmp_path / "ref")
    status, text = served.request("POST", "/epoch", "// nothing\n")
    assert status == 200 and json.loads(text)["epoch"] == start + 4  # no epoch for no change


def test_a_program_change_over_http(spark, tmp_path):
    state, pt, facts, gens, rng = bootstrap(spark, tmp_path, "tc", 24)
    (tmp_path / "new").mkdir()
    (tmp_path / "new" / "seed.facts").write_text("1\n3\n")
    new_text = (FAMILIES["tc"][0] + ".decl seed(x:number)\n.input seed\n"
                ".decl reached(y:number)\nreached(y) :- seed(x), path(x, y).\n")
    served = Served(spark, state, factdir=tmp_path)
    try:
        before = StateDir(state).current()
        status, text = served.request("POST", "/program", "reached(y) :- nope(y).\n")
        assert status == 400 and "request:1:" in text and text.count("\n") == 1
        status, text = served.request("POST", f"/program?facts={tmp_path / 'missing'}",
                                      new_text)
        assert status == 400 and "not a directory" in text
        assert StateDir(state).current() == before and served.session.program_text == \
            FAMILIES["tc"][0]
        status, text = served.request("POST", f"/program?facts={tmp_path / 'new'}", new_text)
        assert status == 200, text
        answer = json.loads(text)
        assert answer["epoch"] == before + 1
        assert answer["tasks"]["path"] == "kept" and answer["tasks"]["reached"] == "new"
        new_pt = build_tasks(parse_program(new_text, "new.dl"))
        facts["seed"] = {(1,), (3,)}
        check_against_reference(HttpView(served, spark), new_pt, facts, tmp_path / "r1")
        for k, ops in enumerate(random_epochs(rng, gens, facts, 1), 2):  # then an epoch on it
            status, text = served.request("POST", "/epoch", diff_of(ops))
            assert status == 200, text
            check_against_reference(HttpView(served, spark), new_pt, facts, tmp_path / f"r{k}")
    finally:
        served.close()
    assert StateDir(state).manifest()["program"] == new_text


KILLER = """
import os, signal, sys
from levelflow.engine.incremental.state import directory as state

def die(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)

state.StateDir.switch = die  # the epoch is written, CURRENT not yet replaced
from levelflow.cli import main
main(sys.argv[1:])
"""


def start_serve(state: Path, *code: str, env=None) -> tuple[subprocess.Popen, int]:
    """Start `levelflow serve STATE --port 0` (under `code` if given); return it and its port."""
    # A JVM of its own, started as the tests' is (conftest.py): C1-only JIT, serial GC.
    env = env or dict(os.environ, PYTHONPATH=str(ROOT / "src"),
                      JAVA_TOOL_OPTIONS="-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
    argv = ["serve", str(state), "--port", "0", "--master", "local[1]"]
    cmd = [sys.executable, "-c", code[0], *argv] if code else \
        [sys.executable, "-m", "levelflow", *argv]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    line = proc.stdout.readline()
    assert line.startswith("levelflow serve: listening on http://127.0.0.1:"), \
        line + proc.stderr.read()
    port = int(line.split("http://127.0.0.1:")[1].split()[0])
    return proc, port


def post(port: int, body: str) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    try:
        conn.request("POST", "/epoch", body)
        resp = conn.getresponse()
        return resp.status, resp.read().decode()
    finally:
        conn.close()


def test_serve_killed_mid_epoch_keeps_the_previous_epoch(spark, tmp_path):
    state, pt, facts, _, _ = bootstrap(spark, tmp_path, "tc", 24)
    proc, port = start_serve(state, KILLER)
    try:
        with pytest.raises((http.client.HTTPException, ConnectionError)):
            post(port, "+edge(700, 701)\n")
        assert proc.wait(timeout=120) == -signal.SIGKILL
    finally:
        proc.kill()
    assert StateDir(state).current() == 0
    again = IncrementalSession.open(spark, state)  # every file verifies
    check_against_reference(again, pt, facts, tmp_path / "ref0")
    again.close()
    proc, port = start_serve(state)  # served again: the epoch goes through, SIGTERM stops it
    try:
        status, text = post(port, "+edge(700, 701)\n")
        assert status == 200 and json.loads(text)["epoch"] == 1, text
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert "levelflow serve: stopped at epoch 1" in out
    finally:
        proc.kill()
    facts["edge"].add((700, 701))
    check_against_reference(IncrementalSession.open(spark, state), pt, facts, tmp_path / "r1")
