"""Replay issue 42's faults against a real `levelflow serve` and the `state` commands.

Run: .venv/bin/python bench/bench_faults.py [--epoch-timeout S] [--request-timeout S]

Starts `levelflow serve` on a small state (closure, a regex filter, lists, a counter) in a temp
folder, then sends each attack or careless request of issue 42 and checks, for each: the HTTP
status, the seconds to the answer, that the answer is one line, that no byte of a secret file
outside the fact folder reaches the answer or the state directory, and that the state's epoch
moved only where the request was valid. A thread polls /status all along and the slowest
/status answer is printed: the server must keep answering while an epoch runs. Then the
server is stopped and CURRENT is damaged three ways; `state repair` must make the last
acknowledged epoch current again. Prints one row per case and `N of M cases pass`.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import secrets
import select
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

LEVELFLOW = [sys.executable, "-m", "levelflow"]
PROGRAM = """
.decl edge(x:number, y:number)
.input edge
.decl path(x:number, y:number)
.output path
path(x, y) :- edge(x, y).
path(x, z) :- path(x, y), edge(y, z).
.decl word(s:symbol)
.input word
.decl matched(s:symbol)
.output matched
matched(s) :- word(s), match("(a+)+$", s).
.type L = [head:number, tail:L]
.decl lists(l:L)
.input lists
.output lists
.type P = [name:symbol, n:number]
.decl pairs(p:P)
.input pairs
.output pairs
.decl lim(n:number)
.input lim
.decl nat(n:number)
.output nat
nat(0).
nat(n + 1) :- nat(n), lim(m), n < m.
"""
FACTS = {"edge": "1\t2\n2\t3\n", "word": "aaa\n", "lists": "[1, nil]\n", "lim": "3\n",
         "pairs": "[a, 1]\n"}


class Server:
    """A `levelflow serve` subprocess and a client for it."""

    def __init__(self, state: Path, facts: Path, epoch_timeout: float, request_timeout: float):
        self.proc = subprocess.Popen(
            LEVELFLOW + ["serve", str(state), "--port", "0", "-F", str(facts),
                         "--epoch-timeout", str(epoch_timeout),
                         "--request-timeout", str(request_timeout), "--max-tuples", "1000000"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        m = re.search(r"http://([\d.]+):(\d+)", line)
        if m is None:
            raise SystemExit(f"serve did not start: {line}{self.proc.stderr.read()}")
        self.host, self.port = m.group(1), int(m.group(2))
        self.slowest_status = 0.0
        self._polling = True
        self._poller = threading.Thread(target=self._poll, daemon=True)

    def request(self, method: str, path: str, body: str | None = None,
                timeout: float = 600) -> tuple[int, str, float]:
        """Return (status, body, seconds) of one request on a new connection."""
        t0 = time.perf_counter()
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            conn.request(method, path, body=body.encode() if body is not None else None)
            response = conn.getresponse()
            return response.status, response.read().decode(errors="replace"), \
                time.perf_counter() - t0
        except (OSError, http.client.HTTPException) as e:
            return 0, f"no answer: {type(e).__name__}: {e}", time.perf_counter() - t0
        finally:
            conn.close()

    def wait_ready(self) -> None:
        """Wait until /status says the session is open."""
        while True:
            status, text, _ = self.request("GET", "/status")
            if status == 200 and not json.loads(text).get("starting"):
                self._poller.start()
                return
            time.sleep(0.2)

    def epoch(self) -> int:
        """Return the server's current epoch."""
        return json.loads(self.request("GET", "/status")[1])["epoch"]

    def _poll(self) -> None:
        while self._polling:
            status, _, seconds = self.request("GET", "/status", timeout=120)
            if status == 200:
                self.slowest_status = max(self.slowest_status, seconds)
            time.sleep(0.25)

    def stop(self) -> None:
        """Stop polling and the server (SIGTERM: a clean stop)."""
        self._polling = False
        self.proc.terminate()
        self.proc.wait(timeout=120)


def slow_headers(server: Server, gap: float, lines: int) -> tuple[int, str, float]:
    """Send a GET's header lines `gap` seconds apart, stopping when the server answers; return
    (status, first line of the answer, seconds to it)."""
    t0 = time.perf_counter()
    data = b""
    with socket.create_connection((server.host, server.port), timeout=120) as sock:
        sock.sendall(b"GET /status HTTP/1.1\r\nHost: x\r\n")
        for i in range(lines + 1):
            ready, _, _ = select.select([sock], [], [], gap)
            if ready:
                break
            try:
                sock.sendall(f"X-Slow-{i}: y\r\n".encode() if i < lines else b"\r\n")
            except OSError:
                break
        answered = time.perf_counter() - t0
        try:
            while chunk := sock.recv(4096):
                data += chunk
        except OSError:
            pass
    first = data.split(b"\r\n", 1)[0].decode(errors="replace")
    m = re.match(r"HTTP/1\.[01] (\d+)", first)
    return (int(m.group(1)) if m else 0), first, answered


def leaked(secret: str, answer: str, state: Path) -> bool:
    """Return whether the secret is in the answer or in any file of the state."""
    if secret in answer:
        return True
    for path in state.rglob("*"):
        if path.is_file() and secret.encode() in path.read_bytes():
            return True
    return False


def nested(depth: int) -> str:
    return "[1, " * depth + "nil" + "]" * depth


def main() -> None:
    """Run every case and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epoch-timeout", type=float, default=20.0)
    ap.add_argument("--request-timeout", type=float, default=3.0)
    args = ap.parse_args()
    rows: list[tuple[str, str, str, float, bool]] = []

    def case(name: str, expect: str, got: str, seconds: float, ok: bool) -> None:
        rows.append((name, expect, got, seconds, ok))
        print(f"{'pass' if ok else 'FAIL'}  {name:<34} {seconds:7.2f} s  expect {expect}; "
              f"got {got[:110]}", flush=True)

    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(os.path.realpath(tmp_name))
        facts, state = tmp / "facts", tmp / "state"
        facts.mkdir()
        for name, text in FACTS.items():
            (facts / f"{name}.facts").write_text(text)
        (tmp / "program.dl").write_text(PROGRAM)
        secret = "hunter2" + secrets.token_hex(8)
        (tmp / "pw.txt").write_text(f"{secret}\n")
        (tmp / "pin.txt").write_text(f'"{secret}"\n')
        (facts / "link.dl").symlink_to(tmp / "pw.txt")
        t0 = time.perf_counter()
        subprocess.run(LEVELFLOW + ["run", str(tmp / "program.dl"), "-F", str(facts), "-D",
                                    str(tmp / "out"), "--state", str(state)],
                       check=True, capture_output=True)
        print(f"state made in {time.perf_counter() - t0:.1f} s", flush=True)
        server = Server(state, facts, args.epoch_timeout, args.request_timeout)
        server.wait_ready()

        def refused(name: str, method: str, path: str, body: str | None, *,
                    secret_check: bool = False, limit: float = 60.0) -> None:
            """A request that must be refused with one 4xx line, nothing applied."""
            before = server.epoch()
            status, text, seconds = server.request(method, path, body)
            one_line = text.strip().count("\n") == 0
            unchanged = server.epoch() == before
            ok = 400 <= status < 500 and one_line and unchanged and seconds <= limit
            if secret_check:
                ok = ok and not leaked(secret, text, state)
            case(name, "4xx, one line, state unchanged" + (", no secret" if secret_check
                                                          else ""),
                 f"{status} {text.strip()}", seconds, ok)

        base = PROGRAM + ".decl pin(s:symbol)\n.output pin\n"
        refused("#include an absolute path", "POST", "/program",
                base + f'#include "{tmp}/pw.txt"\n', secret_check=True)
        refused("#include ..", "POST", "/program?facts=", base + '#include "../pw.txt"\n',
                secret_check=True)
        refused("#include a symlink in the facts", "POST", "/program?facts=",
                base + '#include "link.dl"\n', secret_check=True)
        refused(".include into a relation", "POST", "/program",
                base + f'pin(\n.include "{tmp}/pin.txt"\n).\n', secret_check=True)
        status, first, seconds = slow_headers(server, 1.0, 8)
        case("header lines 1 s apart", f"408 within {args.request_timeout:.0f} s + 2",
             first, seconds, status == 408 and seconds <= args.request_timeout + 2)
        bomb = "#define A0 x x x x x x x x x x\n" + "".join(
            f"#define A{i} A{i - 1} A{i - 1} A{i - 1} A{i - 1} A{i - 1} A{i - 1} A{i - 1} "
            f"A{i - 1} A{i - 1} A{i - 1}\n" for i in range(1, 9))
        refused("#define expansion bomb", "POST", "/program", base + bomb + "pin(A8).\n",
                limit=30)
        refused("range of 10^9", "POST", "/program",
                base + ".decl r(x:number)\n.output r\nr(x) :- x = range(0, 1000000000).\n",
                limit=60)
        refused("a symbol doubling every round", "POST", "/program",
                base + '.decl s(x:symbol)\n.output s\ns("ab").\ns(cat(x, x)) :- s(x).\n',
                limit=120)
        refused("facts=a NUL b", "POST", "/program?facts=a%00b", PROGRAM)
        refused("a record nested 600 deep", "POST", "/epoch", f"+lists({nested(600)})\n")
        refused("a record field of the wrong type", "POST", "/program",
                base + '.decl q(l:L)\n.output q\nq([1, "a"]).\n')
        # (a bare word is a symbol in a diff, as in a fact file: [12, 3] holds the symbol "12")
        refused("a word in a record's number field", "POST", "/epoch", "+pairs([a, b])\n")
        refused("a malformed diff line", "POST", "/epoch", "+edge(1,\n")
        status, text, seconds = server.request("GET", "/relations/%ff%00")
        case("a garbage relation name", "4xx, one line", f"{status} {text.strip()}", seconds,
             400 <= status < 500 and text.strip().count("\n") == 0)

        word = "a" * 41 + "!"
        status, text, seconds = server.request("POST", "/epoch", f'+word("{word}")\n')
        matched = server.request("GET", "/relations/matched")[1].split()
        case("match((a+)+$) over 42 chars", "200 in seconds, not matched",
             f"{status} matched={matched}", seconds,
             status == 200 and seconds < 30 and word not in matched)
        before = server.epoch()
        status, text, seconds = server.request("POST", "/epoch", "+lim(100000000)\n")
        # Ended by whichever bound comes first: --max-tuples (422) or --epoch-timeout (503).
        case("an epoch of 10^8 rounds",
             f"422 or 503 within ~{args.epoch_timeout:.0f} s, state unchanged",
             f"{status} {text.strip()}", seconds,
             status in (422, 503) and seconds <= args.epoch_timeout * 2 + 10
             and server.epoch() == before)
        status, text, seconds = server.request("POST", "/epoch", "+edge(3,4)\n")
        path = server.request("GET", "/relations/path")[1]
        case("an epoch after the cancelled one", "200, path holds 1->4",
             f"{status} {text.strip()[:60]}", seconds, status == 200 and "1\t4" in path)
        acknowledged = server.epoch()
        server.stop()
        case("/status while epochs ran", "slowest answer <= 1 s",
             f"{server.slowest_status:.2f} s", server.slowest_status,
             server.slowest_status <= 1.0)

        current = state / "CURRENT"
        original = current.read_text()
        digit = re.search(r"[0-9a-f]{64}", original)
        flipped = original[:digit.start()] + ("0" if original[digit.start()] != "0" else "1") \
            + original[digit.start() + 1:]
        for name, damage in (("CURRENT's hash flipped", lambda: current.write_text(flipped)),
                             ("CURRENT empty", lambda: current.write_text("")),
                             ("CURRENT deleted", current.unlink)):
            damage()
            t0 = time.perf_counter()
            check = subprocess.run(LEVELFLOW + ["state", "check", str(state)],
                                   capture_output=True, text=True)
            repair = subprocess.run(LEVELFLOW + ["state", "repair", str(state)],
                                    capture_output=True, text=True)
            after = subprocess.run(LEVELFLOW + ["state", "check", str(state)],
                                   capture_output=True, text=True)
            seconds = time.perf_counter() - t0
            m = re.search(r"epoch (\d+)", repair.stdout + repair.stderr)
            got = f"check {check.returncode}, repair {repair.returncode}: " \
                f"{(repair.stdout + repair.stderr).strip()}"
            case(name, f"repair makes epoch {acknowledged} current", got, seconds,
                 check.returncode != 0 and repair.returncode == 0 and after.returncode == 0
                 and m is not None and int(m.group(1)) == acknowledged
                 and "Traceback" not in check.stderr + repair.stderr)
            current.write_text(original)

    passed = sum(ok for *_, ok in rows)
    print(f"{passed} of {len(rows)} cases pass")
    sys.exit(0 if passed == len(rows) else 1)


if __name__ == "__main__":
    main()
