"""`levelflow serve`: a maintained state held warm behind a local HTTP interface.

    POST /epoch                  body: a diff (`+edge(1,2)` / `-edge(2,3)` lines, as
                                 `update --insert FILE` reads): applied as one epoch; answers
                                 JSON {epoch, relations: {name: {added, removed}}, notes,
                                 strategies, seconds, spark_jobs}
    POST /program[?facts=DIR]    body: a new program's text: the state moves to it as one
                                 epoch (`update --program NEW.dl --facts DIR`); new input
                                 relations read DIR (on the server's machine). Answers as
                                 /epoch, plus {tasks: {task: kept|updated|recomputed|new}}
    GET  /relations/NAME         the relation's tuples, tab-separated and sorted (as outputs)
    GET  /relations/NAME/size    {"relation": NAME, "size": N}
    GET  /status                 {"state", "epoch", "epochs_queued", "sizes"}

Epochs run one at a time, in arrival order (one lock; the others wait for it). A request is
parsed and checked whole before it queues: a bad one gets a 4xx whose body is one line naming
the request line, and applies nothing. Chains are compacted after an epoch's answer is sent,
before the next epoch. Reading tuples waits for a running epoch (its commit may delete the
files the old snapshot reads); sizes and status do not.
Constant: the session's program. Changes: the session's snapshot, one epoch at a time.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

from levelflow.engine.session import jobs_started
from levelflow.errors import LevelflowError

MAX_BODY = 64 << 20  # bytes of one epoch's diff


class RequestError(LevelflowError):
    """A request the server refuses: its HTTP status and one line."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class EpochService:
    """What the endpoints do, over one IncrementalSession; no HTTP here."""

    def __init__(self, session, label: str, log=None, include_dirs: tuple = ()) -> None:
        self.session = session
        self.include_dirs = include_dirs  # where a posted program's #include looks
        self.label = label  # the state directory, as status reports it
        self.lock = threading.Lock()  # one epoch at a time; tuple reads wait for it
        self.queued = 0
        self.log = log or sys.stderr

    def parse(self, body: bytes) -> list:
        """Return the ops of an epoch's body; raise RequestError(400) naming the bad line."""
        from levelflow.engine.incremental.updates import parse_diff

        try:
            text = body.decode("utf-8-sig")
        except UnicodeDecodeError as e:
            raise RequestError(400, f"request: error: the body is not UTF-8 ({e})") from None
        return parse_diff(self.session.program, text, "request")

    def epoch(self, ops: list) -> dict:
        """Return the answer to an epoch of `ops` (call with the lock held)."""
        s = self.session
        if not ops:
            return {"epoch": s.epoch, "relations": {}, "notes": ["nothing to do: no fact to "
                    "insert or remove; the state is unchanged"], "strategies": {},
                    "seconds": 0.0, "spark_jobs": 0}
        s.discard()  # nothing a failed request queued may leak into this epoch
        s.extend(ops)
        jobs, t0 = jobs_started(s.spark), time.perf_counter()
        try:
            result = s.commit(compact=False)  # compacted once the answer is out: compact()
        except BaseException:
            s.discard()
            raise
        return self._answer(result, jobs, t0)

    def _answer(self, result, jobs: int, t0: float) -> dict:
        """Return the JSON answer to an epoch: per relation its change, notes, strategies, and
        the seconds and Spark jobs since `t0` and `jobs`."""
        return {"epoch": result.epoch,
                "relations": {n: {"added": d.added_rows, "removed": d.removed_rows}
                              for n, d in sorted(result.deltas.items())},
                "notes": result.notes, "strategies": result.strategies,
                "seconds": round(time.perf_counter() - t0, 4),
                "spark_jobs": jobs_started(self.session.spark) - jobs}

    def new_program(self, body: bytes, query: str):
        """Return the checked new program and its facts directory (None: no new facts), or
        raise RequestError(400) with the program's first error."""
        from levelflow.engine.incremental.program_change import load_new_program
        from levelflow.engine.incremental.session_api import ProgramText

        try:
            text = body.decode("utf-8-sig")
        except UnicodeDecodeError as e:
            raise RequestError(400, f"request: error: the body is not UTF-8 ({e})") from None
        facts = parse_qs(query).get("facts", [None])[0]
        try:
            program = ProgramText(text, "request", self.include_dirs)
            load_new_program(program, facts)  # errors before queuing
        except LevelflowError as e:
            raise RequestError(400, str(e).splitlines()[0]) from None
        return program, facts

    def program(self, new) -> dict:
        """Return the answer to moving to a new program (call with the lock held)."""
        s = self.session
        s.discard()
        jobs, t0 = jobs_started(s.spark), time.perf_counter()
        result = s.replace_program(*new)
        return {**self._answer(result, jobs, t0), "tasks": dict(sorted(result.status.items()))}

    def compact(self) -> None:
        """Fold chains past the policy (call with the lock held); a failure is only logged."""
        try:
            self.session.compact()
        except LevelflowError as e:
            print(f"levelflow serve: {e}", file=self.log, flush=True)

    def relation_name(self, name: str) -> str:
        """Return `name` if the program declares it; else raise RequestError(404)."""
        if name not in self.session.program.decls:
            raise RequestError(404, f"error: unknown relation {name!r}")
        return name

    def tuples(self, name: str) -> str:
        """Return a relation's tuples as an output file holds them (sorted, tab-separated)."""
        from levelflow.engine.facts import format_rows

        decl = self.session.program.decls[self.relation_name(name)]
        with self.lock:
            df = self.session.relation(name)
            rows = df.orderBy(*df.columns).collect() if decl.arity else df.limit(1).collect()
        return "".join(format_rows(rows, decl))

    def status(self) -> dict:
        """Return the state, its epoch, the epochs waiting and every relation's size."""
        snap = self.session.snap  # one snapshot: epoch and sizes agree
        return {"state": self.label, "epoch": snap.epoch, "epochs_queued": self.queued,
                "sizes": dict(sorted(snap.rows.items()))}


class Handler(BaseHTTPRequestHandler):
    """The HTTP side: routes, bodies, one-line errors."""

    server_version = "levelflow"
    protocol_version = "HTTP/1.1"  # keep-alive: a stream of epochs reuses one connection

    @property
    def service(self) -> EpochService:
        return self.server.service  # type: ignore[attr-defined]

    def log_message(self, format, *args) -> None:  # noqa: A002 - the base class's name
        pass  # one line per request would drown the one line that matters

    def _send(self, status: int, body: str, kind: str = "application/json") -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", f"{kind}; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _json(self, payload: dict) -> None:
        self._send(200, json.dumps(payload) + "\n")

    def _fail(self, e: BaseException) -> None:
        """Answer an error with one line: 4xx for the request's fault, else 409 or 500."""
        from levelflow.engine.incremental.state import StateError
        from levelflow.engine.incremental.updates import UpdateError

        if isinstance(e, RequestError):
            status = e.status
        elif isinstance(e, UpdateError):
            status = HTTPStatus.BAD_REQUEST
        elif isinstance(e, StateError):  # e.g. another writer moved the state on
            status = HTTPStatus.CONFLICT
        elif isinstance(e, LevelflowError):  # a task failed: the previous epoch stays
            status = HTTPStatus.INTERNAL_SERVER_ERROR
        else:
            from levelflow.engine.workers import one_line

            status, e = 500, RuntimeError(f"error: {one_line(e)}")
        self._send(int(status), str(e).splitlines()[0] + "\n", "text/plain")

    def _body(self) -> bytes:
        """Return the request's body; raise RequestError for a missing or huge one."""
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit():
            raise RequestError(411, "request: error: a Content-Length header is required")
        if int(length) > MAX_BODY:
            raise RequestError(413, f"request: error: body of {length} bytes; at most "
                               f"{MAX_BODY} per epoch")
        return self.rfile.read(int(length))

    def do_POST(self) -> None:  # noqa: N802 - the base class's name
        """Apply the body (a diff, or a new program) as one epoch; compact after answering."""
        url = urlsplit(self.path)
        try:
            body = self._body()
            if url.path == "/epoch":
                ops = self.service.parse(body)
                run, changes = (lambda: self.service.epoch(ops)), bool(ops)
            elif url.path == "/program":
                new = self.service.new_program(body, url.query)
                run, changes = (lambda: self.service.program(new)), True
            else:
                raise RequestError(404, f"error: no endpoint POST {self.path} (POST /epoch, "
                                   f"/program)")
        except LevelflowError as e:
            self._fail(e)
            return
        self._run_epoch(run, changes)

    def _run_epoch(self, run, changes: bool) -> None:
        svc = self.service
        svc.queued += 1  # under the GIL; only status reads it
        with svc.lock:
            svc.queued -= 1
            try:
                payload = run()
            except Exception as e:  # noqa: BLE001 - every failure is one line to the client
                self._fail(e)
                return
            self._json(payload)
            if changes:
                svc.compact()

    def do_GET(self) -> None:  # noqa: N802 - the base class's name
        """Answer /status, /relations/NAME and /relations/NAME/size."""
        parts = [unquote(p) for p in urlsplit(self.path).path.strip("/").split("/")]
        try:
            if parts == ["status"]:
                self._json(self.service.status())
            elif len(parts) == 3 and parts[0] == "relations" and parts[2] == "size":
                name = self.service.relation_name(parts[1])
                self._json({"relation": name, "size": self.service.session.size(name)})
            elif len(parts) == 2 and parts[0] == "relations":
                self._send(200, self.service.tuples(parts[1]), "text/tab-separated-values")
            else:
                raise RequestError(404, f"error: no endpoint GET {self.path} (GET /status, "
                                   f"/relations/NAME, /relations/NAME/size)")
        except Exception as e:  # noqa: BLE001 - one line to the client, the server stays up
            self._fail(e)


def make_server(service: EpochService, host: str = "127.0.0.1",
                port: int = 0) -> ThreadingHTTPServer:
    """Return an HTTP server bound to host:port (0: any free port) serving `service`."""
    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    server.service = service  # type: ignore[attr-defined]
    return server
