"""Frames exchanged between the P tasks of one barrier Spark job, worker to worker over TCP.

Runs in the Python workers of a barrier stage (every task scheduled at once). Each task listens
on a port, the addresses are swapped once through the driver (Rendezvous), and then every
superstep each task sends every other task one message (its frames for that task, and a few
counters) and reads one from each: a round of a distributed fixpoint moves its delta without a
Spark job. A connection first presents the job's random token; one that does not is refused.
A message is the counters, then per section its copy id and an Arrow IPC stream (no pickle on
the wire). One thread per peer sends while the task reads, so large messages cannot deadlock.
"""

from __future__ import annotations

import io
import json
import select
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
    def open(cls, token: str, timeout: float, rendezvous: tuple[str, int]) -> Exchange:
        """Return the exchange of this barrier task with every other task of the stage, the
        addresses swapped through the driver's `rendezvous` (host, port; `meeting`)."""
        from pyspark import BarrierTaskContext

        ctx = BarrierTaskContext.get()
        me = ctx.partitionId()
        parts = len(ctx.getTaskInfos())
        host = ctx.getTaskInfos()[me].address.rsplit(":", 1)[0]
        server = socket.create_server(("", 0), backlog=parts)
        try:
            mine = json.dumps([me, host, server.getsockname()[1]])
            said = swap_at(rendezvous, token, (ctx.stageId(), ctx.taskAttemptId()), mine,
                           timeout)
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


def swap_at(rendezvous: tuple[str, int], token: str, task: tuple[int, int], mine: str,
            timeout: float) -> list[str]:
    """Return every address line of this task's stage (`task`: stage id, task attempt id),
    swapped through the driver's Rendezvous."""
    body = json.dumps([*task, mine]).encode()
    try:
        with socket.create_connection(rendezvous, timeout=timeout) as sock:
            sock.sendall(_ASK.pack(len(token), len(body)) + token.encode() + body)
            size, = struct.unpack("<i", _recv(sock, 4))
            return json.loads(bytes(_recv(sock, size)))
    except (OSError, ValueError, ExchangeError) as e:
        raise ExchangeError(f"the driver's rendezvous failed: {e}") from None


_ASK = struct.Struct("<ii")  # token bytes, body bytes
_ASK_MAX = 1 << 16  # a longer token or body is not a task's: refused unread


def _closed(sock: socket.socket) -> bool:
    """Return whether the peer of a waiting connection is gone (it sends nothing more)."""
    try:
        if not select.select([sock], [], [], 0)[0]:
            return False  # nothing to read: still waiting
        return sock.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


class Rendezvous:
    """The driver's side of every barrier job's address swap, in place of the barrier's
    allGather (Spark's barrier tasks poll for it once a second: about 1 s of each job). One per
    driver process (`meeting`). Each task connects, presents its job's token (one `expect`ed),
    its stage and task attempt ids and its address line; once every partition of the stage
    has, each gets them all. Keyed by stage: a job run again (a lazy frame read twice) is
    another stage, so a token stays expected as long as the driver runs. A retried stage
    keeps its id: a partition's newer task replaces its older one, and a task gone before
    the swap is waited for anew (Spark kills a failed attempt's tasks before retrying it)."""

    def __init__(self, timeout: float = TIMEOUT_SECONDS) -> None:
        self.timeout = timeout
        self.server = socket.create_server(("", 0), backlog=64)
        self.port = self.server.getsockname()[1]
        self.parts: dict[str, int] = {}  # token -> tasks per stage
        # (token, stage) -> partition -> (task attempt id, connection, address line)
        self.waiting: dict[tuple[str, int], dict[int, tuple[int, socket.socket, str]]] = {}
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def expect(self, token: str, parts: int) -> None:
        """Serve the jobs presenting `token`, of `parts` tasks each."""
        with self.lock:
            self.parts[token] = parts

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self.server.accept()
            except OSError:
                return  # closed
            # A thread per connection: a silent one holds up no other task.
            threading.Thread(target=self._hear, args=(sock,), daemon=True).start()

    def _hear(self, sock: socket.socket) -> None:
        try:
            sock.settimeout(self.timeout)
            sizes = _ASK.unpack(_recv(sock, _ASK.size))
            if not all(0 < n <= _ASK_MAX for n in sizes):
                raise ExchangeError("not a task's request")
            token = bytes(_recv(sock, sizes[0])).decode()
            stage, task, line = json.loads(bytes(_recv(sock, sizes[1])))
            me = json.loads(line)[0]
        except (OSError, ExchangeError, ValueError, TypeError, IndexError):
            sock.close()  # a task that hears nothing fails its job (its ExchangeError names it)
            return
        with self.lock:
            parts = self.parts.get(token)
            if parts is None:
                sock.close()  # not a job of ours: told nothing
                return
            group = self.waiting.setdefault((token, stage), {})
            old = group.get(me)
            if old is not None and old[0] > task:
                sock.close()  # a late task of an attempt already retried
                return
            group[me] = (task, sock, line)
            if old is not None:
                old[1].close()
            for p, (_, peer, _) in list(group.items()):
                if _closed(peer):
                    peer.close()
                    del group[p]
            if len(group) < parts:
                return  # the stage's last task answers everyone
            del self.waiting[(token, stage)]
        table = json.dumps([line for _, _, line in group.values()]).encode()
        for _, peer, _ in group.values():
            try:
                peer.sendall(struct.pack("<i", len(table)) + table)
            except OSError:
                pass  # that task is gone: its stage fails and is retried
            finally:
                peer.close()

    def close(self) -> None:
        """Stop serving."""
        self.server.close()


_MEETING: list[Rendezvous] = []
_MEETING_LOCK = threading.Lock()


def meeting(spark, token: str, parts: int) -> tuple[str, int]:
    """Return the address (host, port) at which the barrier jobs presenting `token` swap
    their tasks' addresses: the driver's Rendezvous, at the driver host Spark's executors
    reach (spark.driver.host)."""
    with _MEETING_LOCK:
        if not _MEETING:
            _MEETING.append(Rendezvous())
        meeting = _MEETING[0]
    meeting.expect(token, parts)
    host = spark.sparkContext.getConf().get("spark.driver.host") or "127.0.0.1"
    return host, meeting.port


def _close(*socks: Mapping[int, socket.socket]) -> None:
    for group in socks:
        for sock in group.values():
            sock.close()
