"""What a client of `levelflow serve` can make it read or write (issue 32 item 1).

A posted program's `.input` files must lie in the fact folder (-F; STATE/facts by default) and
its `.output` files in STATE/outputs, symbolic links followed and `..` resolved; `?facts=DIR`
names a folder inside the fact folder. A refused program is a 400 naming the directive's line,
and nothing is applied. `--no-confine` lifts it, with a warning line at start-up.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from test_incremental_properties import FAMILIES
from test_serve import Served, bootstrap
from test_serve_protocol import exchange, post, responses
from tests_jvm import PRELUDE, env_on

from levelflow.cli import main as cli_main
from levelflow.engine.incremental import IncrementalSession, StateDir

TC = FAMILIES["tc"][0]
WHY = "(levelflow serve confines files; --no-confine lifts it)"
ON_THE_TESTS_JVM = PRELUDE + "import sys\nfrom levelflow.cli import main\nmain(sys.argv[1:])\n"


@pytest.fixture(scope="module")
def tree(spark, tmp_path_factory):
    """tmp/facts (-F) with new/seed.facts and link.facts -> tmp/secret.facts; a tc state."""
    tmp = Path(os.path.realpath(tmp_path_factory.mktemp("confine")))
    (tmp / "facts" / "new").mkdir(parents=True)
    (tmp / "facts" / "new" / "seed.facts").write_text("1\n3\n")
    (tmp / "secret.facts").write_text("4242\n")
    (tmp / "facts" / "link.facts").symlink_to(tmp / "secret.facts")
    state, *_ = bootstrap(spark, tmp, "tc", 41)
    return tmp, state


@pytest.fixture(scope="module")
def served(spark, tree):
    tmp, state = tree
    served = Served(spark, state, factdir=tmp / "facts")
    yield served
    served.close()


def secret_program(directive: str) -> str:
    return TC + ".decl secret(x:number)\n" + directive + "\n"


LINE = TC.count("\n") + 2  # the directive's line in secret_program


@pytest.mark.parametrize("query,directive,message", [
    # the attack of issue 32: an absolute path, with or without ?facts=
    ("?facts=", '.input secret(filename="{tmp}/secret.facts")',
     "request:{line}:8: error: .input secret reads {tmp}/secret.facts, outside the fact "
     "directory -F {tmp}/facts {why}"),
    ("", '.input secret(filename="/etc/hostname")',
     "request:{line}:8: error: .input secret reads {hostname}, outside the fact directory "
     "-F {tmp}/facts {why}"),
    # a symbolic link out of the fact folder, and ..
    ("?facts=", '.input secret(filename="link.facts")',
     "request:{line}:8: error: .input secret reads {tmp}/secret.facts, outside the fact "
     "directory -F {tmp}/facts {why}"),
    ("?facts=new", '.input secret(filename="../../secret.facts")',
     "request:{line}:8: error: .input secret reads {tmp}/secret.facts, outside the fact "
     "directory -F {tmp}/facts/new {why}"),
    # a fact folder outside -F
    ("?facts=..", '.input secret(filename="secret.facts")',
     "request: error: facts=.. is outside the fact folder -F {tmp}/facts {why}"),
    ("?facts={tmp}", '.input secret(filename="secret.facts")',
     "request: error: facts={tmp} is outside the fact folder -F {tmp}/facts {why}"),
    # outputs: only inside STATE/outputs
    ("", '.input secret\n.output secret(filename="{tmp}/stolen.csv")',
     "request:{out}:9: error: .output secret writes {tmp}/stolen.csv, outside the output "
     "directory {tmp}/state/outputs {why}"),
    ("", '.input secret\n.output secret(filename="../../stolen.csv")',
     "request:{out}:9: error: .output secret writes {tmp}/stolen.csv, outside the output "
     "directory {tmp}/state/outputs {why}"),
])
def test_a_program_reading_or_writing_outside_is_refused_whole(served, tree, query, directive,
                                                                message):
    tmp, state = tree
    before, program = StateDir(state).current(), served.session.program_text
    text = secret_program(directive.format(tmp=tmp))
    status, answer = served.request("POST", "/program" + query.format(tmp=tmp), text)
    assert status == 400
    assert answer == message.format(tmp=tmp, line=LINE, out=LINE + 1, why=WHY,
                                    hostname=os.path.realpath("/etc/hostname")) + "\n"
    assert StateDir(state).current() == before and served.session.program_text == program
    assert served.request("GET", "/relations/secret")[0] == 404
    assert not (tmp / "stolen.csv").exists()


def test_a_program_reading_inside_the_fact_folder_is_applied(spark, tmp_path):
    state, *_ = bootstrap(spark, tmp_path, "tc", 42)
    (tmp_path / "state" / "facts" / "v2").mkdir(parents=True)  # the default -F: STATE/facts
    (tmp_path / "state" / "facts" / "v2" / "secret.facts").write_text("5\n6\n")
    served = Served(spark, state)
    try:
        text = secret_program('.input secret\n.output secret(filename="sub/secret.csv")')
        status, answer = served.request("POST", "/program?facts=v2", text)
        assert status == 200, answer
        assert json.loads(answer)["tasks"]["secret"] == "new"
        assert served.request("GET", "/relations/secret") == (200, "5\n6\n")
    finally:
        served.close()


def test_without_confinement_a_program_reads_anywhere(spark, tmp_path):
    state, *_ = bootstrap(spark, tmp_path, "tc", 43)
    (tmp_path / "secret.facts").write_text("4242\n")
    served = Served(spark, state, confine=False)
    try:
        text = secret_program(f'.input secret(filename="{tmp_path}/secret.facts")')
        status, answer = served.request("POST", f"/program?facts={tmp_path}", text)
        assert status == 200, answer
        assert served.request("GET", "/relations/secret") == (200, "4242\n")
    finally:
        served.close()


@pytest.mark.parametrize("flag,value,message", [
    ("--request-timeout", "0", "--request-timeout: must be a number of seconds > 0, got 0.0"),
    ("--max-queued", "0", "--max-queued: must be a positive integer, got 0"),
    ("-F", "/nonexistent/facts", "-F: /nonexistent/facts: error: fact folder does not exist"),
])
def test_a_bad_serve_flag_is_one_line(tree, capsys, flag, value, message):
    with pytest.raises(SystemExit) as e:
        cli_main(["serve", str(tree[1]), flag, value])
    assert e.value.code == 1 and capsys.readouterr().err == message + "\n"


def test_serve_no_confine_warns_and_takes_the_request_timeout(spark, tmp_path):
    state, *_ = bootstrap(spark, tmp_path, "tc", 44)
    (tmp_path / "secret.facts").write_text("4242\n")
    # The command runs on the tests' JVM: this test is about serve's flags, not Spark's start.
    proc = subprocess.Popen([sys.executable, "-c", ON_THE_TESTS_JVM, "serve", str(state),
                             "--port", "0", "--master", "local[1]", "--no-confine",
                             "--request-timeout", "1"], env=env_on(spark),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr.readline() == (
            "levelflow serve: warning: --no-confine: a client's program may read any file "
            "this process can read and name any .output file\n")
        line = proc.stdout.readline()
        port = int(line.split("http://127.0.0.1:")[1].split()[0])
        [(status, _, text)] = responses(exchange(port, post("+edge(1,2)\n", 100)))
        assert status == 408 and "in 1 s" in text  # --request-timeout reached the server
        with socket.create_connection(("127.0.0.1", port), timeout=300) as sock:
            body = secret_program(f'.input secret(filename="{tmp_path}/secret.facts")')
            sock.sendall(f"POST /program?facts={tmp_path} HTTP/1.1\r\nHost: t\r\nContent-Length: "
                         f"{len(body)}\r\nConnection: close\r\n\r\n{body}".encode())
            got = b""
            while chunk := sock.recv(65536):
                got += chunk
        assert responses(got)[0][0] == 200, got
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) == 0
    finally:
        proc.kill()
        proc.communicate()
    again = IncrementalSession.open(spark, state)
    try:
        assert {tuple(r) for r in again.relation("secret").collect()} == {(4242,)}
    finally:
        again.close()


@pytest.mark.parametrize("host,warned", [("127.0.0.1", False), ("::1", False),
                                         ("localhost", False), ("0.0.0.0", True),
                                         ("example.org", True)])
def test_a_host_others_can_reach_is_a_warning_line(capsys, host, warned):
    from levelflow.cli.serve_cmd import _warn

    _warn(host, no_confine=False)
    err = capsys.readouterr().err
    assert err == (f"levelflow serve: warning: --host {host}: not a loopback address; whoever "
                   f"can reach it can change the state and read every relation (no "
                   f"authentication)\n" if warned else "")


# --- #include / .include in a posted program (issue 42) ---------------------------------------

INCLUDE_WHY = "(levelflow serve confines files; --no-confine lifts it)"
SECRET = "hunter2"


@pytest.fixture(scope="module")
def leaky(tree):
    """tmp/pw.dl (a declaration whose type names the secret) and facts/pw.dl -> it."""
    tmp, _ = tree
    (tmp / "pw.dl").write_text(f".decl leak(x:{SECRET})\n")
    (tmp / "facts" / "pw.dl").symlink_to(tmp / "pw.dl")
    return tmp


@pytest.mark.parametrize("text,line", [
    # the two leaks: the text in the error line, the text in a relation
    ('#include "{tmp}/pw.dl"\n', 1),
    ('.decl pin(x:symbol)\npin(\n#include "{tmp}/pw.dl"\n).\n', 3),
    ('.include "../pw.dl"\n', 1),  # .. out of the fact folder (and the server's folder)
    ('#include "pw.dl"\n', 1),  # a symbolic link in the fact folder to a file outside it
    ('#line 1 "{tmp}/x.dl"\n#include "pw.dl"\n', 1),  # looked up beside a made-up file
])
def test_a_posted_include_outside_the_fact_folder_is_refused_unread(served, tree, leaky, text,
                                                                     line):
    tmp, state = tree
    text = text.format(tmp=tmp)
    name = text.split('#include "' if "#include" in text else '.include "')[1].split('"')[0]
    # after `#line 1 "x.dl"`, the next line is x.dl's line 1
    where = f"{tmp}/x.dl:1" if text.startswith("#line") else f"request:{TC.count(chr(10)) + line}"
    before, program = StateDir(state).current(), served.session.program_text
    status, answer = served.request("POST", "/program", TC + text)
    assert status == 400
    assert answer == (f"{where}:1: error: #include \"{name}\": no "
                      f"such file inside the folders a program may include from ({tmp}/facts) "
                      f"{INCLUDE_WHY}\n")
    assert StateDir(state).current() == before and served.session.program_text == program
    assert served.request("GET", "/relations/pin")[0] == 404
    assert SECRET.encode() not in b"".join(p.read_bytes() for p in state.rglob("*")
                                           if p.is_file())


def test_a_posted_include_from_the_fact_folder_or_an_include_dir_is_applied(spark, tmp_path):
    state, *_ = bootstrap(spark, tmp_path, "tc", 45)
    (tmp_path / "state" / "facts").mkdir(parents=True)  # the default -F: STATE/facts
    (tmp_path / "state" / "facts" / "one.dl").write_text(".decl one(x:number)\none(1).\n")
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "two.dl").write_text(".decl two(x:number)\ntwo(x + 1) :- one(x).\n")
    served = Served(spark, state, include_dirs=(str(tmp_path / "inc"),))
    try:
        status, answer = served.request("POST", "/program",
                                        TC + '#include "one.dl"\n#include "two.dl"\n')
        assert status == 200, answer
        assert served.request("GET", "/relations/two") == (200, "2\n")
    finally:
        served.close()
