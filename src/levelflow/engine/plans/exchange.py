"""Frames exchanged between the P tasks of one barrier Spark job, worker to worker over TCP.

Runs in the Python workers of a barrier stage (every task scheduled at once). Each task listens
on a port, the addresses are swapped once through BarrierTaskContext.allGather, and then every
superstep each task sends every other task one message (its frames for that task, and a few
counters) and reads one from each: a round of a distributed fixpoint moves its delta without a
Spark job. A connection first presents the job's random token; one that does not is refused.
A message is the counters, then per section its copy id and an Arrow IPC stream (no pickle on
the wire). One thread per peer sends while the task reads, so large messages cannot deadlock.
"""

from __future__ import annotations

import io
import json
import socket
import struct
import threading
from collections.abc import Mapping

import polars as pl
import pyarrow as pa

# Seconds a task waits on a silent peer before it fails (a peer's round can be long).
TIMEOUT_SECONDS = 3600.0
_HEAD = struct.Struct("<qqi")  # counter a, counter b, sections
_SECTION = struct.Struct("<iq")  # copy id, bytes


class ExchangeError(RuntimeError):
    """A peer failed or sent something that is not a message of this job."""


def _recv(sock: socket.socket, size: int) -> bytearray:
    buf = bytearray(size)
    view, got = memoryview(buf), 0
    while got < size:
        n = sock.recv_into(view[got:])
        if not n:
            raise ExchangeError("a peer closed its connection mid-message")
        got += n
    return buf


def _encode(frames: Mapping[int, list[pl.DataFrame]], counters: tuple[int, int]) -> list:
    """Return a message as a list of buffers."""
    parts = []
    for copy, pieces in frames.items():
        pieces = [p for p in pieces if p.height]
        if not pieces:
            continue
        table = pl.concat(pieces, how="vertical_relaxed").to_arrow()
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        body = sink.getvalue()
        parts.append(_SECTION.pack(copy, body.size))
        parts.append(body)
    return [_HEAD.pack(counters[0], counters[1], len(parts) // 2), *parts]


class Exchange:
    """This task's connections to its peers."""

    def __init__(self, me: int, parts: int, outgoing: dict, incoming: dict,
                 timeout: float = TIMEOUT_SECONDS) -> None:
        self.me, self.parts = me, parts
        self.outgoing, self.incoming = outgoing, incoming
        self.timeout = timeout

    @classmethod
    def open(cls, token: str, timeout: float = TIMEOUT_SECONDS,
             rendezvous: tuple[str, int] | None = None) -> Exchange:
        """Return the exchange of this barrier task with every other task of the stage; the
        addresses swapped through the driver's `rendezvous` (host, port) when given, else
        through the barrier's allGather."""
        from pyspark import BarrierTaskContext

        ctx = BarrierTaskContext.get()
        me = ctx.partitionId()
        parts = len(ctx.getTaskInfos())
        host = ctx.getTaskInfos()[me].address.rsplit(":", 1)[0]
        server = socket.create_server(("", 0), backlog=parts)
        try:
            mine = json.dumps([me, host, server.getsockname()[1]])
            said = ctx.allGather(mine) if rendezvous is None else \
                swap_at(rendezvous, token, mine, timeout)
            where = {p: (h, port) for p, h, port in map(json.loads, said)}
            return cls.connect(me, where, server, token, timeout)
        finally:
            server.close()

    @classmethod
    def connect(cls, me: int, where: Mapping[int, tuple[str, int]], server: socket.socket,
                token: str, timeout: float) -> Exchange:
        """Return task `me`'s exchange: a connection to each peer at `where` (task -> host,
        port) and one accepted from each on `server`; ExchangeError if a peer presents another
        token or is silent for `timeout` seconds."""
        parts = len(where)
        server.settimeout(timeout)
        outgoing, incoming = {}, {}
        try:
            for peer in range(parts):
                if peer != me:
                    sock = socket.create_connection(where[peer], timeout=timeout)
                    outgoing[peer] = sock
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    sock.sendall(token.encode() + struct.pack("<i", me))
            while len(incoming) < parts - 1:
                sock, _ = server.accept()
                sock.settimeout(timeout)
                said = bytes(_recv(sock, len(token) + 4))
                if said[:len(token)] != token.encode():
                    sock.close()
                    raise ExchangeError("a connection to the distributed plan's exchange "
                                        "presented another job's token")
                incoming[struct.unpack("<i", said[len(token):])[0]] = sock
        except TimeoutError:
            _close(outgoing, incoming)
            raise ExchangeError(f"task {me}: a peer did not connect within {timeout:g} s"
                                ) from None
        except BaseException:
            _close(outgoing, incoming)
            raise
        return cls(me, parts, outgoing, incoming, timeout)

    def swap(self, out: Mapping[int, Mapping[int, list[pl.DataFrame]]], counters: tuple[int, int]
             ) -> tuple[dict[int, list[pl.DataFrame]], list[tuple[int, int]]]:
        """Send each peer its frames (`out[peer][copy]`) and our counters; return the frames
        every task sent us (ours included, not serialized) per copy, and every task's counters."""
        errors: list[BaseException] = []

        def send(peer: int) -> None:
            try:
                self.outgoing[peer].sendall(b"".join(
                    memoryview(b) if isinstance(b, pa.Buffer) else b
                    for b in _encode(out.get(peer, {}), counters)))
            except BaseException as e:  # noqa: BLE001 - reported by the reading thread
                errors.append(e)

        threads = [threading.Thread(target=send, args=(p,), daemon=True) for p in self.outgoing]
        for t in threads:
            t.start()
        got: dict[int, list[pl.DataFrame]] = {}
        for copy, frames in out.get(self.me, {}).items():
            got.setdefault(copy, []).extend(f for f in frames if f.height)
        seen = [(0, 0)] * self.parts
        seen[self.me] = counters
        for peer, sock in sorted(self.incoming.items()):
            try:
                a, b, sections = _HEAD.unpack(_recv(sock, _HEAD.size))
                seen[peer] = (a, b)
                for _ in range(sections):
                    copy, size = _SECTION.unpack(_recv(sock, _SECTION.size))
                    table = pa.ipc.open_stream(io.BytesIO(_recv(sock, size))).read_all()
                    got.setdefault(copy, []).append(pl.from_arrow(table))
            except TimeoutError:
                raise ExchangeError(f"task {self.me}: task {peer} sent nothing for "
                                    f"{self.timeout:g} s") from None
            except ExchangeError as e:
                raise ExchangeError(f"task {self.me}: task {peer}: {e}") from None
        for t in threads:
            t.join()
        if errors:
            raise ExchangeError(f"sending to a peer failed: {errors[0]}")
        return got, seen

    def close(self) -> None:
        """Close every connection."""
        _close(self.outgoing, self.incoming)


def swap_at(rendezvous: tuple[str, int], token: str, mine: str, timeout: float) -> list[str]:
    """Return every task's address line, swapped through the driver's Rendezvous."""
    try:
        with socket.create_connection(rendezvous, timeout=timeout) as sock:
            said = mine.encode()
            sock.sendall(token.encode() + struct.pack("<i", len(said)) + said)
            size, = struct.unpack("<i", _recv(sock, 4))
            return json.loads(bytes(_recv(sock, size)))
    except (OSError, ValueError) as e:
        raise ExchangeError(f"the driver's rendezvous failed: {e}") from None


class Rendezvous:
    """The driver's side of a barrier job's address swap, in place of the barrier's allGather
    (Spark's barrier tasks poll for it once a second: about 1 s of each job). Each task
    connects, presents the job's token and says its address line; once every task has, each
    gets them all. Serves one job, in a daemon thread; `address` is what the tasks are told."""

    def __init__(self, parts: int, token: str, host: str, timeout: float = TIMEOUT_SECONDS
                 ) -> None:
        self.parts, self.token, self.timeout = parts, token, timeout
        self.server = socket.create_server(("", 0), backlog=parts)
        self.address = (host, self.server.getsockname()[1])
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        said: dict[int, str] = {}
        socks = []
        self.server.settimeout(self.timeout)
        try:
            while len(said) < self.parts:
                sock, _ = self.server.accept()
                sock.settimeout(self.timeout)
                head = bytes(_recv(sock, len(self.token) + 4))
                if head[:len(self.token)] != self.token.encode():
                    sock.close()  # not this job's task: it gets nothing
                    continue
                socks.append(sock)
                line = bytes(_recv(sock, struct.unpack("<i", head[len(self.token):])[0]))
                said[json.loads(line)[0]] = line.decode()
            table = json.dumps(list(said.values())).encode()
            for sock in socks:
                sock.sendall(struct.pack("<i", len(table)) + table)
        except (OSError, ExchangeError, ValueError):
            pass  # a task that hears nothing fails its job (its ExchangeError names it)
        finally:
            for sock in socks:
                sock.close()
            self.server.close()

    def close(self) -> None:
        """Stop serving (the job ended)."""
        self.server.close()


def _close(*socks: Mapping[int, socket.socket]) -> None:
    for group in socks:
        for sock in group.values():
            sock.close()
