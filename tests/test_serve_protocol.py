"""`levelflow serve`'s HTTP framing, over raw sockets on 127.0.0.1 (issue 33 item 1).

Only a whole request is applied: a body cut short is a 400, a request (headers and body) slower
than the request timeout (1 s here) a 408. A refusal that leaves bytes unread (411, 413, two
Content-Length headers) answers once and closes the connection: what followed is never read as
a request. Other methods get one line, not an HTML page. Each case checks the state did not move.
"""

from __future__ import annotations

import select
import socket
import time

import pytest
from test_serve import Served, bootstrap

from levelflow.engine.incremental import StateDir

SMUGGLED = "POST /epoch HTTP/1.1\r\nHost: t\r\nContent-Length: 15\r\n\r\n+edge(600,601)\n"


@pytest.fixture(scope="module")
def served(spark, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("protocol")
    state, *_ = bootstrap(spark, tmp, "tc", 31)
    served = Served(spark, state, timeout=1.0)
    yield served, state
    served.close()


def exchange(port: int, raw: bytes, *, half_close: bool = False, wait: float = 30) -> bytes:
    """Return every byte the server sends after `raw` until it closes (or `wait` passes)."""
    with socket.create_connection(("127.0.0.1", port), timeout=wait) as sock:
        sock.sendall(raw)
        if half_close:
            sock.shutdown(socket.SHUT_WR)
        got = b""
        while chunk := sock.recv(65536):
            got += chunk
    return got


def responses(data: bytes) -> list[tuple[int, dict, str]]:
    """Return the (status, headers, body) of each HTTP response in `data`."""
    out = []
    while data:
        head, _, rest = data.partition(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        headers = {k.lower(): v.strip() for k, v in (ln.split(":", 1) for ln in lines[1:])}
        n = int(headers.get("content-length", 0))
        out.append((int(lines[0].split()[1]), headers, rest[:n].decode()))
        data = rest[n:]
    return out


def unchanged(served, state, before: int) -> None:
    assert StateDir(state).current() == before == served.session.epoch
    assert not served.session.pending


def post(body: str, length: int | None = None, extra: str = "") -> bytes:
    n = len(body.encode()) if length is None else length
    return (f"POST /epoch HTTP/1.1\r\nHost: t\r\nContent-Length: {n}\r\n{extra}\r\n"
            f"{body}").encode()


def test_a_body_cut_short_is_400_and_applies_nothing(served):
    s, state = served
    before = s.session.epoch
    [(status, headers, text)] = responses(exchange(s.port, post("+edge(500,501)\n", 1000),
                                                   half_close=True))
    assert status == 400 and text == ("request: error: the body was cut short: 15 of 1000 "
                                      "bytes arrived; nothing applied\n")
    assert headers["connection"] == "close"
    unchanged(s, state, before)


def test_a_stalled_body_is_408_after_the_request_timeout(served):
    s, state = served
    before, t0 = s.session.epoch, time.monotonic()
    [(status, _, text)] = responses(exchange(s.port, post("+edge(500,501)\n", 1000)))
    assert status == 408 and "15 of 1000 body bytes arrived in 1 s" in text
    assert text.count("\n") == 1 and time.monotonic() - t0 < 15
    unchanged(s, state, before)


@pytest.mark.parametrize("head,status,fragment", [
    ("POST /epoch HTTP/1.1\r\nHost: t\r\n\r\n", 411, "a Content-Length header is required"),
    ("POST /epoch HTTP/1.1\r\nHost: t\r\nContent-Length: 67108865\r\n\r\n", 413,
     "body of 67108865 bytes"),
    ("POST /epoch HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\nContent-Length: 0\r\n\r\n", 400,
     "2 Content-Length headers"),
    ("POST /epoch HTTP/1.1\r\nHost: t\r\nContent-Length: +15\r\n\r\n", 400, "not a number"),
    ("POST /epoch HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n", 411,
     "Transfer-Encoding is not supported"),
    ("PUT /epoch HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n", 405,
     "method PUT is not allowed"),
    ("DELETE /relations/path HTTP/1.1\r\nHost: t\r\n\r\n", 405, "method DELETE is not allowed"),
    ("BREW /pot HTTP/1.1\r\nHost: t\r\n\r\n", 501, "Unsupported method ('BREW')"),
])
def test_a_refusal_closes_and_what_followed_is_never_a_request(served, head, status, fragment):
    s, state = served
    before = s.session.epoch
    got = responses(exchange(s.port, head.encode() + SMUGGLED.encode()))
    assert len(got) == 1, got  # one answer; the smuggled epoch was not read
    code, headers, text = got[0]
    assert code == status and fragment in text and text.count("\n") == 1
    assert text.startswith("request: error: ") and "<" not in text  # no HTML page
    assert headers["connection"] == "close"
    if status == 405:
        assert headers["allow"] == "GET, POST"
    unchanged(s, state, before)


def test_a_get_with_a_body_does_not_leave_it_as_the_next_request(served):
    s, state = served
    before = s.session.epoch
    head = f"GET /status HTTP/1.1\r\nHost: t\r\nContent-Length: {len(SMUGGLED)}\r\n\r\n"
    got = responses(exchange(s.port, (head + SMUGGLED).encode()))
    assert [g[0] for g in got] == [200]
    unchanged(s, state, before)


def test_a_whole_request_keeps_the_connection_for_the_next(served):
    s, state = served
    before = s.session.epoch
    raw = post("+edge(1,2)\nedge(3,4)\n") + post("+edge(700,701)\n",
                                                extra="Connection: close\r\n")
    got = responses(exchange(s.port, raw))
    assert [g[0] for g in got] == [400, 200]  # a checked body's refusal keeps the connection
    assert got[0][2].startswith("request:2: error: a diff line starts with + or -")
    assert StateDir(state).current() == before + 1
    assert s.session.has_base("edge", (700, 701))


def trickle(port: int, lines: list[str], gap: float) -> tuple[bytes, float, int]:
    """Send `lines` one every `gap` seconds until the server answers or closes; return what it
    sent, the seconds until it did, and how many lines went out."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        t0, sent = time.monotonic(), 0
        for line in lines:
            try:
                sock.sendall(line.encode())
            except OSError:  # it closed already
                break
            sent += 1
            ready, _, _ = select.select([sock], [], [], gap)
            if ready:
                break
        got = b""
        try:
            while chunk := sock.recv(65536):
                got += chunk
        except ConnectionResetError:
            pass
        return got, time.monotonic() - t0, sent


def test_slow_header_lines_are_408_within_the_request_timeout(served):
    # 20 header lines 0.4 s apart: each arrives well within the 1 s timeout, the whole request
    # would take 8 s. The timeout bounds the request: 408 after 1 s, one line, closed.
    s, state = served
    before = s.session.epoch
    lines = ["GET /status HTTP/1.1\r\n"] + [f"X-Slow-{i}: {i}\r\n" for i in range(20)] + ["\r\n"]
    got, seconds, sent = trickle(s.port, lines, 0.4)
    [(status, headers, text)] = responses(got)
    assert status == 408 and text.count("\n") == 1, text
    assert "did not arrive within 1 s (the request timeout)" in text
    assert headers["connection"] == "close"
    assert seconds < 4 and sent < len(lines)
    unchanged(s, state, before)


def test_slow_headers_then_body_count_against_one_timeout(served):
    # Headers over 0.8 s, then the body over the next 0.8 s: each part alone is within 1 s.
    s, state = served
    before = s.session.epoch
    body = "+edge(800,801)\n"
    head = post(body).decode().split("\r\n\r\n")[0]
    lines = [ln + "\r\n" for ln in head.split("\r\n")] + ["\r\n", body[:5], body[5:10], body[10:]]
    got, seconds, _ = trickle(s.port, lines, 0.4)
    [(status, _, text)] = responses(got)
    assert status == 408 and "nothing applied" in text and seconds < 4, text
    unchanged(s, state, before)


def test_an_idle_connection_closes_without_an_answer(served):
    s, _ = served
    with socket.create_connection(("127.0.0.1", s.port), timeout=30) as sock:
        t0 = time.monotonic()
        assert sock.recv(65536) == b""  # closed: no request began, so nothing to answer
        assert 0.9 < time.monotonic() - t0 < 4
