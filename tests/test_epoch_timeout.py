"""`run` and `update` with `--epoch-timeout` (issue 42): an evaluation or epoch still running
past it is cancelled, said in one line, and nothing is written: no outputs, no state, the state
at its previous epoch (which `state check` and the next epoch see).

The slow programs count up to the largest `lim`, one semi-naive round a number, so
`lim(100000000)` would run for hours: `nat` in one Spark job (its Python worker is killed with
the job), `best` (subsumptive) in rounds in the driver, which check the cancel flag.
"""

from __future__ import annotations

from test_serve_deadlines import NAT, upto

from levelflow.engine.incremental import StateDir

FOREVER = 100_000_000
BEST = """
.decl lim(n: number)
.input lim
.decl best(n: number, c: number)
.output best
best(0, 5).
best(0, 3).
best(n + 1, c) :- best(n, c), lim(m), n < m.
best(n, c1) <= best(n, c2) :- c2 < c1.
"""


def program(tmp, text: str, limit: int):
    """Write the program and lim.facts holding `limit`; return (program, fact folder)."""
    (tmp / "facts").mkdir(exist_ok=True)
    (tmp / "facts" / "lim.facts").write_text(f"{limit}\n")
    (tmp / "p.dl").write_text(text)
    return tmp / "p.dl", tmp / "facts"


def diff(tmp, limit: int):
    (tmp / "more.diff").write_text(f"+lim({limit})\n")
    return tmp / "more.diff"


def test_run_past_its_epoch_timeout_writes_nothing(cli, cli_spark, tmp_path):
    prog, facts = program(tmp_path, NAT, FOREVER)
    code, out, err = cli(["run", prog, "-F", facts, "-D", tmp_path / "out", "--epoch-timeout",
                          "3", "-q"])
    assert (code, out) == (1, "")
    assert err == "levelflow: error: the run cancelled after 3 s (--epoch-timeout); no output " \
                  "was written\n"
    assert not (tmp_path / "out").exists()
    code, out, err = cli(["run", prog, "-F", facts, "-D", tmp_path / "out", "--epoch-timeout",
                          "3", "-q", "--state", tmp_path / "state"])
    assert code == 1 and err == "levelflow: error: epoch 0 cancelled after 3 s " \
                                "(--epoch-timeout): no state was written\n"
    assert not StateDir(tmp_path / "state").exists()
    # Within its deadline, the flag changes nothing.
    (facts / "lim.facts").write_text("5\n")
    code, out, err = cli(["run", prog, "-F", facts, "-D", tmp_path / "out", "--epoch-timeout",
                          "300", "-q"])
    assert code == 0, err
    assert (tmp_path / "out" / "nat.csv").read_text() == upto(5)


def test_update_past_its_epoch_timeout_keeps_the_state(cli, cli_spark, tmp_path):
    prog, facts = program(tmp_path, NAT, 5)
    state = tmp_path / "state"
    assert cli(["run", prog, "-F", facts, "--state", state, "-D", tmp_path / "out", "-q"])[0] == 0
    code, out, err = cli(["update", state, "--insert", diff(tmp_path, FOREVER),
                          "--epoch-timeout", "3"])
    assert (code, out) == (1, "")
    assert err == "levelflow: error: epoch 1 cancelled after 3 s (--epoch-timeout): the state " \
                  "stays at epoch 0\n"
    assert StateDir(state).current() == 0
    code, out, err = cli(["state", "check", state])
    assert code == 0 and "epoch 0" in out, out + err
    code, out, err = cli(["update", state, "--insert", diff(tmp_path, 7), "-D",
                          tmp_path / "out"])
    assert code == 0, err
    assert StateDir(state).current() == 1
    assert (tmp_path / "out" / "nat.csv").read_text() == upto(7)


def test_an_epoch_running_in_the_driver_stops_at_its_deadline(cli, cli_spark, tmp_path):
    # best's epochs run in the driver (strategies/subsumed.py), a Polars round per number:
    # nothing for Spark to cancel; the rounds check the flag.
    prog, facts = program(tmp_path, BEST, 2)
    state = tmp_path / "state"
    assert cli(["run", prog, "-F", facts, "--state", state, "-D", tmp_path / "out", "-q"])[0] == 0
    assert (tmp_path / "out" / "best.csv").read_text() == "0\t3\n1\t3\n2\t3\n"
    code, out, err = cli(["update", state, "--insert", diff(tmp_path, FOREVER),
                          "--epoch-timeout", "3"])
    assert code == 1 and err == "levelflow: error: epoch 1 cancelled after 3 s " \
                                "(--epoch-timeout): the state stays at epoch 0\n"
    assert StateDir(state).current() == 0
    code, out, err = cli(["update", state, "--insert", diff(tmp_path, 3), "-D",
                          tmp_path / "out"])
    assert code == 0 and "strategies: lim=counting, best=subsume" in out, out + err
    assert (tmp_path / "out" / "best.csv").read_text() == "0\t3\n1\t3\n2\t3\n3\t3\n"
