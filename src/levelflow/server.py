"""`levelflow serve`: a maintained state held warm behind a local HTTP interface.

    POST /epoch                  body: a diff (`+edge(1,2)` / `-edge(2,3)` lines, as
                                 `update --insert FILE` reads): applied as one epoch; answers
                                 JSON {epoch, relations: {name: {added, removed}}, notes,
                                 strategies, seconds, spark_jobs}
    POST /program[?facts=DIR]    body: a new program's text: the state moves to it as one
                                 epoch (`update --program NEW.dl --facts DIR`); new input
                                 relations read DIR, relative to the fact folder (-F) and
                                 inside it. Answers as /epoch, plus {tasks: {task: kept|..}}
    GET  /relations/NAME         the relation's tuples, tab-separated and sorted (as outputs)
    GET  /relations/NAME/size    {"relation": NAME, "size": N}
    GET  /status                 {"state", "starting", "epoch", "epochs_queued", "sizes"}

A request is applied only once it arrived whole (request line, headers and Content-Length body
bytes, all within the one request timeout; else 400 or 408) and was checked (else a 4xx whose
body is one line naming the request line); a refused one applies nothing. Every request is
answered: an error no check foresaw is a 500 with one line, its stack on the server's stderr.
Epochs then run one at a time in arrival order (serve_service.EpochQueue). A refusal that
leaves unread bytes (411, 413, a bad or doubled Content-Length, a cut or late body) closes the
connection, so they are never read as a request.
Chains are compacted after an epoch's answer is sent, before the next epoch. Reads go on while
an epoch runs (serve_service says how they keep their files).
Constant: the routes, the timeout. Changes: nothing here; the service holds the state.
"""

from __future__ import annotations

import io
import json
import socket
import sys
import time
import traceback
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

from levelflow.errors import LevelflowError
from levelflow.serve_service import REQUEST_TIMEOUT, EpochService, RequestError

__all__ = ["EpochService", "Handler", "RequestError", "Server", "make_server"]

MAX_BODY = 64 << 20  # bytes of one epoch's diff
BACKLOG = 128  # connections the kernel holds before accepting (Python's default: 5)
LINGER_SECONDS, LINGER_BYTES = 2.0, 1 << 20  # what a closing refusal reads and drops
ROUTES = "GET /status, /relations/NAME, /relations/NAME/size; POST /epoch, /program"


class _Closing(RequestError):
    """A refusal after which the connection's unread bytes cannot be trusted: it closes."""


class _DeadlineReader(io.RawIOBase):
    """The connection's reads, each bounded by what is left of the request's deadline: a
    client sending its headers slowly cannot hold a thread past the request timeout."""

    def __init__(self, handler: Handler) -> None:
        super().__init__()
        self.handler = handler

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        left = self.handler.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        sock = self.handler.connection
        sock.settimeout(left)
        got = sock.recv_into(buffer)
        self.handler.received += got
        return got


class Handler(BaseHTTPRequestHandler):
    """The HTTP side: routes, whole bodies, one-line errors."""

    server_version = "levelflow"
    protocol_version = "HTTP/1.1"  # keep-alive: a stream of epochs reuses one connection
    # The headers and the body go out as two writes: with Nagle's algorithm the second waits
    # for the client's delayed ACK of the first, 40 ms on every keep-alive request (a GET
    # /status took 46.6 ms; 1.7 ms without).
    disable_nagle_algorithm = True

    @property
    def service(self) -> EpochService:
        return self.server.service  # type: ignore[attr-defined]

    def setup(self) -> None:
        self.timeout = self.server.request_timeout  # type: ignore[attr-defined]
        super().setup()
        self.rfile.close()  # the base class's reader: ours bounds the whole request
        self.rfile = io.BufferedReader(_DeadlineReader(self))

    def handle_one_request(self) -> None:
        """Read one request within the request timeout, whole (line, headers, body), and answer
        it; an error no check foresaw is a 500 with one line, logged with its stack."""
        self.deadline, self.received, self.answered = time.monotonic() + self.timeout, 0, False
        self.command = self.request_version = self.requestline = ""  # set by parse_request
        try:
            self.raw_requestline = self.rfile.readline(65537)
            if len(self.raw_requestline) > 65536:
                self.send_error(HTTPStatus.REQUEST_URI_TOO_LONG)
                return
            if not self.raw_requestline:  # the client closed between requests
                self.close_connection = True
                return
            if not self.parse_request():  # answered (send_error)
                return
            method = getattr(self, f"do_{self.command}", None)
            if method is None:
                self.send_error(HTTPStatus.NOT_IMPLEMENTED,
                                f"Unsupported method ({self.command!r})")
                return
            method()
        except TimeoutError:
            self.close_connection = True
            if self.received and not self.answered:  # an idle keep-alive just closes
                self.send_error(HTTPStatus.REQUEST_TIMEOUT,
                                f"the request line and headers did not arrive within "
                                f"{self.timeout:g} s (the request timeout); nothing applied")
        except Exception as e:  # noqa: BLE001 - every request gets an answer
            self.close_connection = True
            if self.answered:  # the answer is out (or half out): only the log can say it
                self._log_stack(e)
            else:
                self._fail(e)
                self._linger()  # what the client still sends must not reset the answer

    def log_message(self, format, *args) -> None:  # noqa: A002 - the base class's name
        pass  # one line per request would drown the one line that matters

    def _send(self, status: int, body: str, kind: str = "application/json",
              headers: dict | None = None) -> None:
        data = body.encode()
        self.answered = True
        self.connection.settimeout(self.timeout)  # reads left it at the deadline's rest
        self.send_response(status)
        self.send_header("Content-Type", f"{kind}; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        self.wfile.flush()

    def _json(self, payload: dict) -> None:
        self._send(200, json.dumps(payload) + "\n")

    def _fail(self, e: BaseException) -> None:
        """Answer an error with one line: 4xx for the request's fault (422: past a bound, as
        --max-tuples), else 409, 500 or 503 (an epoch cancelled at --epoch-timeout)."""
        from levelflow.engine.guard import SymbolLimit, TupleLimit
        from levelflow.engine.incremental.results import EpochTimeout
        from levelflow.engine.incremental.state.directory import StateError
        from levelflow.engine.incremental.updates import UpdateError
        from levelflow.engine.regex_match import RegexBudgetError

        headers = {}
        if isinstance(e, RequestError):
            status, headers = e.status, e.headers
        elif isinstance(e, UpdateError):
            status = HTTPStatus.BAD_REQUEST
        elif isinstance(e, EpochTimeout):  # nothing applied; the next epoch may fit
            status = HTTPStatus.SERVICE_UNAVAILABLE
        elif isinstance(e, StateError):  # e.g. another writer moved the state on
            status = HTTPStatus.CONFLICT
        elif isinstance(e, (TupleLimit, SymbolLimit, RegexBudgetError)):
            # the epoch asked for more than the server's bounds: nothing applied
            status = HTTPStatus.UNPROCESSABLE_ENTITY
        elif isinstance(e, LevelflowError):  # a task failed: the previous epoch stays
            status = HTTPStatus.INTERNAL_SERVER_ERROR
        else:  # no check foresaw it: the stack goes to the server's log, one line to the client
            from levelflow.engine.workers import one_line

            self._log_stack(e)
            status, e = 500, RuntimeError(f"error: {type(e).__name__}: {one_line(e)}")
        closing = isinstance(e, _Closing)
        if closing:
            self.close_connection = True
        self._send(int(status), str(e).splitlines()[0] + "\n", "text/plain", headers)
        if closing:
            self._linger()

    def _log_stack(self, e: BaseException) -> None:
        """Print an unforeseen error with its stack on the server's stderr."""
        log = getattr(self.service, "log", None) or sys.stderr
        print(f"levelflow serve: error: {self.client_address[0]}: "
              f"{self.requestline!r} failed:", file=log)
        traceback.print_exception(e, file=log)
        log.flush()

    def _linger(self) -> None:
        """Send our end's FIN, then read and drop what the client still sends (briefly): closing
        with unread bytes would reset the connection before the client reads the answer."""
        sock = self.connection
        try:
            sock.shutdown(socket.SHUT_WR)
            end = time.monotonic() + min(LINGER_SECONDS, self.timeout)
            dropped = 0
            while dropped < LINGER_BYTES and (left := end - time.monotonic()) > 0:
                sock.settimeout(left)
                data = sock.recv(1 << 16)
                if not data:
                    break
                dropped += len(data)
        except OSError:
            pass  # the client is gone already: nothing to protect

    def send_error(self, code: int, message: str | None = None,
                   explain: str | None = None) -> None:
        """Answer a malformed request (bad request line, unknown method, huge headers) with one
        line instead of the base class's HTML page, and close."""
        self.close_connection = True
        try:
            self._send(code, f"request: error: {message or HTTPStatus(code).phrase}\n",
                       "text/plain")
        except OSError:
            return
        self._linger()

    def _length(self) -> int:
        """Return the announced body length; raise _Closing if it is missing, doubled, not a
        number or too large (the body is then unread: the connection closes)."""
        values = self.headers.get_all("Content-Length") or []
        if self.headers.get("Transfer-Encoding") is not None:
            raise _Closing(400 if values else 411, "request: error: Transfer-Encoding is not "
                           "supported; send a Content-Length header")
        if len(values) > 1:
            raise _Closing(400, f"request: error: {len(values)} Content-Length headers; send "
                           f"one")
        if not values:
            raise _Closing(411, "request: error: a Content-Length header is required")
        length = values[0].strip()
        if not (length.isascii() and length.isdigit()):
            raise _Closing(400, f"request: error: Content-Length {length!r} is not a number")
        if int(length) > MAX_BODY:
            raise _Closing(413, f"request: error: body of {length} bytes; at most "
                           f"{MAX_BODY} per epoch")
        return int(length)

    def _body(self) -> bytes:
        """Return the whole body, read by the request's deadline; raise _Closing (400 cut
        short, 408 too slow) otherwise."""
        length, got, chunks = self._length(), 0, []
        try:
            while got < length:
                chunk = self.rfile.read1(min(length - got, 1 << 20))
                if not chunk:
                    raise _Closing(400, f"request: error: the body was cut short: {got} of "
                                   f"{length} bytes arrived; nothing applied")
                chunks.append(chunk)
                got += len(chunk)
        except TimeoutError:
            raise _Closing(408, f"request: error: {got} of {length} body bytes arrived in "
                           f"{self.timeout:g} s (the request timeout); nothing applied") \
                from None
        return b"".join(chunks)

    def do_POST(self) -> None:  # noqa: N802 - the base class's name
        """Apply the body (a diff, or a new program) as one epoch; compact after answering."""
        url = urlsplit(self.path)
        try:
            body = self._body()
            if url.path == "/epoch":
                run = self.service.epoch_request(body)
            elif url.path == "/program":
                run = self.service.program_request(body, url.query)
            else:
                raise RequestError(404, f"error: no endpoint POST {self.path} ({ROUTES})")
            self._run_epoch(run)
        except LevelflowError as e:
            self._fail(e)

    def _run_epoch(self, run) -> None:
        """Run an epoch in its turn (503 if too many wait), answer, then compact."""
        svc = self.service
        with svc.queue.turn():
            if svc.stopped:
                raise RequestError(503, "request: error: the server is stopping; nothing "
                                   "applied")
            try:
                before = svc.wait_open().epoch  # an epoch posted while Spark starts waits here
                payload = run()
            except Exception as e:  # noqa: BLE001 - every failure is one line to the client
                self._fail(e)
                return
            try:
                self._json(payload)
            finally:  # the epoch is applied whether or not its client still listens
                if svc.session.epoch != before:
                    svc.compact()

    def do_GET(self) -> None:  # noqa: N802 - the base class's name
        """Answer /status, /relations/NAME and /relations/NAME/size."""
        if self.headers.get("Content-Length", "0").strip() != "0" or \
                self.headers.get("Transfer-Encoding") is not None:
            self.close_connection = True  # an unread body must not be read as a request
        parts = [unquote(p) for p in urlsplit(self.path).path.strip("/").split("/")]
        try:
            if parts == ["status"]:
                self._json(self.service.status())
            elif len(parts) == 3 and parts[0] == "relations" and parts[2] == "size":
                name = self.service.relation_name(parts[1])
                self._json({"relation": name, "size": self.service.size(name)})
            elif len(parts) == 2 and parts[0] == "relations":
                self._send(200, self.service.tuples(parts[1]), "text/tab-separated-values")
            else:
                raise RequestError(404, f"error: no endpoint GET {self.path} ({ROUTES})")
        except Exception as e:  # noqa: BLE001 - one line to the client, the server stays up
            self._fail(e)

    def _not_allowed(self) -> None:
        """Answer a method serve does not take with one line (405) and close."""
        self._fail(_Closing(405, f"request: error: method {self.command} is not allowed "
                            f"({ROUTES})", {"Allow": "GET, POST"}))

    do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _not_allowed


class Server(ThreadingHTTPServer):
    """A thread per connection, a listen backlog for bursts, one line per unexpected error."""

    request_queue_size = BACKLOG
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        """Say an unexpected error in one line; a client that went away is not an error."""
        from levelflow.engine.workers import one_line

        e = sys.exc_info()[1]
        if not isinstance(e, (ConnectionError, TimeoutError)):
            print(f"levelflow serve: error: {client_address[0]}: {one_line(e)}",
                  file=sys.stderr, flush=True)


def make_server(service: EpochService, host: str = "127.0.0.1", port: int = 0,
                request_timeout: float = REQUEST_TIMEOUT) -> Server:
    """Return an HTTP server bound to host:port (0: any free port) serving `service`."""
    server = Server((host, port), Handler)
    server.service = service  # type: ignore[attr-defined]
    server.request_timeout = request_timeout  # type: ignore[attr-defined]
    return server
