"""`levelflow serve` under deadlines (issues 42 and 44).

An epoch past `--epoch-timeout` is cancelled and answered in one line (503); the state stays at
the previous epoch (the next epoch and `state check` see it), and reads are answered while the
epoch runs. The slow epoch: `nat` counts up to the largest `lim`, one semi-naive round a number,
so `+lim(100000000)` would run for hours. `serve` answers /status as soon as it listens, before
its session is open, and epochs posted meanwhile wait for it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from test_serve import Served
from test_serve_load import wait_until
from tests_jvm import PRELUDE, env_on

from levelflow.engine.incremental import IncrementalSession, StateDir

NAT = """
.decl lim(n: number)
.input lim
.decl nat(n: number)
.output nat
nat(0).
nat(n + 1) :- nat(n), lim(m), n < m.
"""
FOREVER = "+lim(100000000)\n"  # 10^8 rounds


def nat_state(spark, tmp, limit: int = 5):
    """Return a state of NAT over lim(limit) (nat = 0..limit)."""
    (tmp / "facts").mkdir()
    (tmp / "facts" / "lim.facts").write_text(f"{limit}\n")
    (tmp / "nat.dl").write_text(NAT)
    state = tmp / "state"
    IncrementalSession.bootstrap(spark, tmp / "nat.dl", tmp / "facts", state).close()
    return state


def upto(n: int) -> str:
    return "".join(f"{i}\n" for i in range(n + 1))


def test_an_epoch_past_its_deadline_is_cancelled_while_reads_go_on(spark, tmp_path, cli,
                                                                    cli_spark):
    state = nat_state(spark, tmp_path)
    served = Served(spark, state)
    # Long enough that the three reads end first on a machine loaded by other test processes.
    served.session.epoch_timeout = 20.0
    # On Spark: an epoch run in the driver shares the server's process (and its GIL), and a
    # runaway one there delays reads by seconds (the note of issue 44 says so).
    served.session.driver_rows = None
    try:
        answer: dict = {}

        def slow():
            answer["post"] = served.request("POST", "/epoch", FOREVER)
            answer["at"] = time.monotonic()

        t0 = time.monotonic()
        poster = threading.Thread(target=slow)
        poster.start()
        wait_until(served.service.lock.locked)  # the epoch holds the lock while it runs
        status, text = served.request("GET", "/status")
        assert status == 200 and json.loads(text)["epoch"] == 0
        assert served.request("GET", "/relations/nat") == (200, upto(5))
        assert served.request("GET", "/relations/nat/size") == (200, json.dumps(
            {"relation": "nat", "size": 6}) + "\n")
        read_at = time.monotonic()
        poster.join(300)
        status, text = answer["post"]
        assert status == 503 and text == ("levelflow: error: epoch 1 cancelled after 20 s "
                                          "(--epoch-timeout): the state stays at epoch 0\n")
        assert read_at < answer["at"] and answer["at"] - t0 >= 20
        assert StateDir(state).current() == 0 and not served.session.pending
        code, out, err = cli(["state", "check", state])
        assert code == 0 and "epoch 0" in out, out + err
        # The next epoch starts from epoch 0, as if the cancelled one never was. (No deadline:
        # the Python worker that held nat's share was killed with the job, and a new one
        # starts cold: 5-10 s on a loaded machine.)
        served.session.epoch_timeout = None
        status, text = served.request("POST", "/epoch", "+lim(7)\n")
        assert status == 200 and json.loads(text)["epoch"] == 1, text
        assert served.request("GET", "/relations/nat") == (200, upto(7))
    finally:
        served.close()
    assert StateDir(state).current() == 1


# Serve on the tests' JVM, its Spark start held until the test creates the gate file.
GATED = PRELUDE + """
import os, sys, time
def gated(*args, **kwargs):
    while not os.path.exists(os.environ["GATE"]):
        time.sleep(0.05)
    return contextlib.nullcontext(spark)
cli_spark.spark_session = gated
from levelflow.cli import main
main(sys.argv[1:])
"""


def test_serve_answers_status_while_starting_and_queues_epochs(spark, tmp_path):
    from test_serve import post
    from test_serve_protocol import exchange, responses

    state = nat_state(spark, tmp_path)
    gate = tmp_path / "gate"
    proc = subprocess.Popen([sys.executable, "-c", GATED, "serve", str(state), "--port", "0"],
                            env={**env_on(spark), "GATE": str(gate)}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("levelflow serve: listening on http://127.0.0.1:") and \
            line.endswith("(state " + str(state) + ", epoch 0; starting Spark)\n"), line
        port = int(line.split("http://127.0.0.1:")[1].split()[0])
        raw = b"GET /status HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
        [(status, _, text)] = responses(exchange(port, raw))
        assert status == 200 and json.loads(text) == {
            "state": str(state), "starting": True, "epoch": 0, "epochs_queued": 0,
            "sizes": {"lim": 1, "nat": 6}}
        answer: dict = {}
        poster = threading.Thread(target=lambda: answer.update(post=post(port, "+lim(7)\n")))
        poster.start()
        time.sleep(1)
        assert poster.is_alive()  # waits for the session
        gate.touch()
        poster.join(300)
        status, text = answer["post"]
        assert status == 200 and json.loads(text)["epoch"] == 1, text
        assert proc.stdout.readline() == "levelflow serve: ready (epoch 0)\n"
        [(status, _, text)] = responses(exchange(port, raw))
        assert json.loads(text)["starting"] is False and json.loads(text)["epoch"] == 1
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert out == "levelflow serve: stopped at epoch 1\n"
    finally:
        proc.kill()
        proc.communicate()
    assert StateDir(state).current() == 1


@pytest.mark.parametrize("value", ["-1", "nan"])
def test_a_bad_epoch_timeout_is_one_line(tmp_path, cli, value):
    code, out, err = cli(["serve", tmp_path, "--epoch-timeout", value])
    assert code == 2 and err == (f"--epoch-timeout: must be a number of seconds >= 0 (0: no "
                                 f"limit), got {float(value)}\n")
    assert not os.listdir(tmp_path)
