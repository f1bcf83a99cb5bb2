"""`levelflow run --master spark://...` on a real standalone cluster gives the local run's outputs.

A Spark standalone master and two workers (1 core, 1g each) start on 127.0.0.1 from the pyspark
installation; the runs happen in one driver subprocess (each `levelflow run` in turn on its
session) because this test session already owns a local SparkContext in-process. The daemons
and the driver are stopped whatever happens.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "pointsto"
WORKERS = 2  # of one core each: the distributed plan's barrier stage spans both


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def _master_status(webui_port: int) -> dict:
    """Return the master's JSON status page ({} while it is unreachable)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{webui_port}/json/", timeout=2) as r:
            return json.load(r)
    except OSError:
        return {}


def _alive_workers(webui_port: int) -> int:
    """Return the number of ALIVE workers the master reports."""
    return sum(1 for w in _master_status(webui_port).get("workers", [])
               if w.get("state") == "ALIVE")


def _stop(proc: subprocess.Popen) -> None:
    """Stop a daemon started in its own process group: TERM, then KILL after 15 s."""
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)


@pytest.fixture(scope="module")
def standalone_master(tmp_path_factory):
    """Yield the spark:// URL of a running standalone master with its registered workers."""
    home = _spark_home()
    logs = tmp_path_factory.mktemp("spark-standalone")
    env = dict(os.environ, SPARK_HOME=str(home), SPARK_LOG_DIR=str(logs))
    port, ui = _free_port(), _free_port()
    spark_class = str(home / "bin" / "spark-class")
    procs = []
    try:
        procs.append(subprocess.Popen(
            [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
             "--port", str(port), "--webui-port", str(ui)],
            env=env, stdout=open(logs / "master.log", "w"), stderr=subprocess.STDOUT,
            start_new_session=True))
        for w in range(WORKERS):
            procs.append(subprocess.Popen(
                [spark_class, "org.apache.spark.deploy.worker.Worker",
                 f"spark://127.0.0.1:{port}", "--host", "127.0.0.1", "--cores", "1", "--memory",
                 "1g", "--webui-port", str(_free_port()), "--work-dir", str(logs / f"work{w}")],
                env=env, stdout=open(logs / f"worker{w}.log", "w"), stderr=subprocess.STDOUT,
                start_new_session=True))
        deadline = time.monotonic() + 60
        while _alive_workers(ui) < WORKERS:
            dead = [p.args[1] for p in procs if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                tail = (logs / "worker0.log").read_text()[-2000:]
                pytest.fail(f"standalone cluster did not come up ({dead or 'timeout'}): {tail}")
            time.sleep(0.3)
        yield f"spark://127.0.0.1:{port}", ui
    finally:
        for proc in reversed(procs):
            _stop(proc)


def _sorted_lines(directory: Path) -> dict[str, list[str]]:
    return {p.name: sorted(p.read_text().splitlines()) for p in sorted(directory.glob("*.csv"))}


# One driver for the module's runs (its JVM start is tests/test_cli_spark.py's subject): the
# CLI's own spark_session starts the cluster application once; each line on stdin is one
# `levelflow` command run on it, answered by a JSON line [exit code, stdout, stderr].
DRIVER = """
import contextlib, io, json, sys
from pathlib import Path
import levelflow.cli.spark as cli_spark
from levelflow.cli import main

with cli_spark.spark_session(sys.argv[1], "1g", Path(sys.argv[2])) as spark:
    cli_spark.spark_session = lambda *args, **kwargs: contextlib.nullcontext(spark)
    for line in sys.stdin:
        out, err, code = io.StringIO(), io.StringIO(), 0
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main(json.loads(line))
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else 1
        print(json.dumps([code, out.getvalue(), err.getvalue()]), flush=True)
"""


class ClusterDriver:
    """A driver process on the standalone master that runs `levelflow run` commands in turn."""

    def __init__(self, master_url: str, logs: Path):
        # The executors' Python is this venv's; a busy machine (CI) may take the master more
        # than the default 30 s to accept the application.
        env = dict(os.environ, PYSPARK_PYTHON=sys.executable, LEVELFLOW_MASTER_TIMEOUT="180")
        self.master_url = master_url
        self.proc = subprocess.Popen([sys.executable, "-c", DRIVER, master_url,
                                      str(logs / "spark.log")],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=open(logs / "stderr.log", "w"), text=True, env=env)

    def send(self, example: Path, outdir: Path, *flags: str) -> None:
        """Start `levelflow run` of an example (its program.dl and facts/) on the cluster."""
        self.command("run", str(example / "program.dl"), "-F", str(example / "facts"), "-D",
                     str(outdir), "-j", "2", "--quiet", *flags)

    def command(self, *argv: str) -> None:
        """Start a `levelflow` command on the cluster (its master and driver memory added)."""
        argv = [*argv, "--master", self.master_url, "--driver-memory", "1g"]
        self.proc.stdin.write(json.dumps(argv) + "\n")
        self.proc.stdin.flush()

    def receive(self) -> tuple[int, str, str]:
        """Return the last command's exit code, stdout and stderr."""
        line = self.proc.stdout.readline()
        assert line, f"the cluster driver ended (exit {self.proc.wait(60)})"
        code, out, err = json.loads(line)
        return code, out, err


@pytest.fixture(scope="module")
def cluster_driver(standalone_master, tmp_path_factory):
    """Yield a ClusterDriver on the standalone master; it is ended whatever happens."""
    driver = ClusterDriver(standalone_master[0], tmp_path_factory.mktemp("driver"))
    try:
        yield driver
    finally:
        driver.proc.stdin.close()
        try:
            driver.proc.wait(60)
        except subprocess.TimeoutExpired:
            driver.proc.kill()
            driver.proc.wait()


def test_the_global_plan_runs_on_standalone_cluster(cluster_driver, tmp_path):
    # The partitioned plan runs on the cluster in test_counted_closure_on_standalone_cluster,
    # the auto plan (pointsto) in test_run_on_standalone_cluster_matches_local_run.
    cluster_driver.send(ROOT / "examples" / "tc", tmp_path, "--plan", "global")
    code, _, stderr = cluster_driver.receive()
    assert code == 0, stderr
    assert _sorted_lines(tmp_path) == _sorted_lines(ROOT / "examples" / "tc" / "expected")


def test_the_distributed_plan_runs_on_two_workers(cluster_driver, tmp_path):
    """A non-linear closure under --plan distributed: one barrier task per worker, swapping
    each round's delta over TCP, gives the naive reference's tuples."""
    from naive_datalog import evaluate as naive_evaluate

    from levelflow.tasks import build_tasks, load_program

    prog = tmp_path / "prog"
    (prog / "facts").mkdir(parents=True)
    (prog / "program.dl").write_text(
        ".decl edge(x:number, y:number)\n.input edge\n.decl path(x:number, y:number)\n"
        "path(x, y) :- edge(x, y).\npath(x, z) :- path(x, y), path(y, z).\n.output path\n")
    (prog / "facts" / "edge.facts").write_text("".join(f"{i}\t{(i * 7 + 3) % 40}\n"
                                                       for i in range(60)))
    cluster_driver.send(prog, tmp_path / "out", "--plan", "distributed", "--trace-out",
                        str(tmp_path / "trace.json"))
    code, _, stderr = cluster_driver.receive()
    assert code == 0, stderr
    expected = naive_evaluate(build_tasks(load_program(prog / "program.dl")), prog / "facts")
    rows = {tuple(map(int, line.split("\t")))
            for line in (tmp_path / "out" / "path.csv").read_text().splitlines()}
    assert rows == expected["path"] and len(rows) > 60
    nodes = json.loads((tmp_path / "trace.json").read_text())["nodes"]
    assert [n["plan"] for n in nodes if n["id"] == "path"] == ["distributed"]


def test_run_on_standalone_cluster_matches_local_run(standalone_master, cluster_driver, spark,
                                                     tmp_path):
    master_ui = standalone_master[1]
    from levelflow.engine.api import load
    from levelflow.engine.runner import run_program

    cluster_out = tmp_path / "cluster"
    cluster_driver.send(EXAMPLE, cluster_out)
    # The local run happens in-process while the cluster run is going.
    local_out = tmp_path / "local"
    local = run_program(spark, load(EXAMPLE / "program.dl"), EXAMPLE / "facts", local_out,
                        scheduler="levelbased", jobs=2)
    code, stdout, stderr = cluster_driver.receive()
    assert code == 0, stderr

    cluster_files = _sorted_lines(cluster_out)
    assert cluster_files == _sorted_lines(local_out)
    assert cluster_files == _sorted_lines(EXAMPLE / "expected")
    assert f"ran {local.ran} of {local.total} tasks" in stdout
    assert f"vpt\t{len(cluster_files['vpt.csv'])}" in stdout.splitlines()
    # The work really went to the cluster: the master runs the driver's application.
    apps = _master_status(master_ui).get("activeapps", [])
    assert any(app.get("name") == "levelflow" for app in apps), apps


def test_counted_closure_on_standalone_cluster(cluster_driver, spark, tmp_path):
    """A closure only `.printsize`d comes back from the executors as its count (one job) and
    matches the local run's."""
    from levelflow.engine.runner import run_program
    from levelflow.tasks import build_tasks, load_program

    prog = tmp_path / "prog"
    (prog / "facts").mkdir(parents=True)
    (prog / "program.dl").write_text(".decl e(x:number, y:number)\n.input e\n"
                                     ".decl t(x:number, y:number)\nt(x, y) :- [e+](x, y).\n"
                                     ".printsize t\n")
    (prog / "facts" / "e.facts").write_text("".join(f"{i}\t{(i * 5 + 1) % 30}\n"
                                                    for i in range(45)))
    cluster_driver.send(prog, tmp_path / "out", "--plan", "partitioned")
    code, stdout, stderr = cluster_driver.receive()
    assert code == 0, stderr
    local = run_program(spark, build_tasks(load_program(prog / "program.dl")), prog / "facts",
                        None, plan="partitioned")
    assert local.printsize["t"] > 45 and f"t\t{local.printsize['t']}" in stdout.splitlines()


def _closure(edges: set) -> set:
    pairs = set(edges)
    while more := {(a, d) for a, b in pairs for c, d in edges if b == c} - pairs:
        pairs |= more
    return pairs


def test_a_closure_is_updated_on_standalone_cluster(cluster_driver, tmp_path):
    """A durable closure's epochs on the cluster's executors, where its state lives:
    deletions inside rings (which split them) and insertions, each epoch's output the closure
    of its edges."""
    from levelflow.engine.incremental.state.directory import StateDir

    prog = tmp_path / "prog"
    (prog / "facts").mkdir(parents=True)
    (prog / "program.dl").write_text(
        ".decl edge(x:number, y:number)\n.input edge\n.decl path(x:number, y:number)\n"
        "path(x, y) :- edge(x, y).\npath(x, z) :- path(x, y), edge(y, z).\n.output path\n")
    edges = {(i, (i + 1) % 8) for i in range(8)} | {(8 + i, 8 + (i + 1) % 8) for i in range(8)}
    edges |= {(0, 4), (3, 11)}

    def facts(name: str, rows) -> Path:
        (tmp_path / name).mkdir()
        (tmp_path / name / "edge.facts").write_text("".join(f"{a}\t{b}\n" for a, b in rows))
        return tmp_path / name / "edge.facts"

    cluster_driver.command("run", str(prog / "program.dl"), "-F",
                           str(facts("f0", sorted(edges)).parent), "--state",
                           str(tmp_path / "state"), "-D", str(tmp_path / "out"), "--quiet")
    code, _, stderr = cluster_driver.receive()
    assert code == 0, stderr
    for k, (gone, fresh) in enumerate([({(1, 2), (9, 10)}, set()), ({(5, 6)}, {(2, 1)}),
                                       (set(), {(15, 3)})]):
        edges = (edges - gone) | fresh
        out = tmp_path / f"out{k}"
        # --strategy incremental: under load the elastic switch's time budget may pass and
        # recompute the closure (CI of a7e6222), which then keeps no labels.
        cluster_driver.command("update", str(tmp_path / "state"),
                               "--remove", str(facts(f"r{k}", sorted(gone))),
                               "--insert", str(facts(f"i{k}", sorted(fresh))), "-D", str(out),
                               "--strategy", "incremental")
        code, stdout, stderr = cluster_driver.receive()
        assert code == 0, stderr
        rows = {tuple(int(v) for v in line.replace(",", "\t").split("\t"))
                for line in (out / "path.csv").read_text().splitlines() if line}
        assert rows == _closure(edges), (k, stdout)
        # Updated where its state lives, by the executors' worker (its stored ranks are the
        # labels it keeps): not recomputed, nor deleted by the Spark-side DRed.
        assert StateDir(tmp_path / "state").manifest()["labelled"] == ["path"]
