"""The shared SparkSession starts and runs a join (guards the session settings)."""


def test_session_runs_a_join(spark):
    left = spark.createDataFrame([(1, "a"), (2, "b")], ["k", "v"])
    right = spark.createDataFrame([(2, "x"), (3, "y")], ["k", "w"])
    rows = left.join(right, "k").collect()
    assert [(r.k, r.v, r.w) for r in rows] == [(2, "b", "x")]
    assert spark.conf.get("spark.sql.shuffle.partitions") == "1"


def test_make_session_keeps_the_jvm_start_up_noise_out_of_the_terminal(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    src = Path(__file__).resolve().parents[1] / "src"
    log = tmp_path / "jvm.log"
    code = ("from levelflow.engine import make_session\n"
            f"s = make_session(master='local[1]', driver_memory='512m', jvm_log={str(log)!r})\n"
            "print(s.range(3).count())\ns.stop()\n")
    proc = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True,
                          text=True, env=dict(os.environ, PYTHONPATH=str(src)), timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "3"
    assert "incubator" not in proc.stderr and "log level" not in proc.stderr
    assert "Using incubator modules" in log.read_text()  # it went to the file asked for
