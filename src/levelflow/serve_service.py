"""What `levelflow serve`'s endpoints do, over one IncrementalSession; no HTTP here.

Epochs (diffs and program changes) take a ticket once their request is read and checked whole,
and run one at a time in ticket order; at most `max_queued` wait, a further one is refused
(503). An epoch is checked again against the program current when its turn comes (a program
change may have run while it waited). A new program's `.input` files must lie in the fact
folder and its `.output` files in the output folder (engine.paths), unless confinement is off;
so must its `#include`d files, in the fact folder or an `--include-dir` folder: any other is
refused by its name before it is read.
Constant: the session, the folders, the bound. Changes: the session's snapshot and program, one
epoch at a time; the tickets.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from pathlib import Path
from urllib.parse import parse_qs

from levelflow.engine.paths import CONFINE_SERVE
from levelflow.engine.session import jobs_started
from levelflow.errors import LevelflowError

MAX_QUEUED = 64  # epochs waiting for their turn before a further one gets 503
REQUEST_TIMEOUT = 60.0  # seconds for a request's headers, and for its whole body (server.py)
RETRY_AFTER = 1  # seconds a refused client is told to wait
FACTS, OUTPUTS = "facts", "outputs"  # the state's own folders (under STATE) unless -F is given
# How a refusal under serve names its folders and the switch (paths.check_io_paths).
SERVE_FLAGS = ("-F", "", "levelflow serve confines files; --no-confine lifts it")


class RequestError(LevelflowError):
    """A request the server refuses: its HTTP status, one line, and extra headers."""

    def __init__(self, status: int, message: str, headers: dict | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.headers = headers or {}


class EpochQueue:
    """Turns in arrival order, one at a time, under `lock`; at most `limit` waiting."""

    def __init__(self, lock: threading.Lock, limit: int) -> None:
        self.lock = lock
        self.limit = limit
        self.waiting = 0
        self._cond = threading.Condition()
        self._next = self._serving = 0  # tickets handed out; the ticket whose turn it is

    @contextlib.contextmanager
    def turn(self):
        """Hold the lock for the block once every earlier ticket is done; 503 if too many wait."""
        with self._cond:
            if self.waiting >= self.limit:
                raise RequestError(503, f"request: error: {self.waiting} epochs are already "
                                   f"waiting (at most {self.limit}); retry later",
                                   {"Retry-After": str(RETRY_AFTER)})
            ticket, self._next = self._next, self._next + 1
            self.waiting += 1
            while self._serving != ticket:
                self._cond.wait()
            self.waiting -= 1
        try:
            with self.lock:
                yield
        finally:
            with self._cond:
                self._serving += 1
                self._cond.notify_all()


def _text(body: bytes) -> str:
    try:
        return body.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise RequestError(400, f"request: error: the body is not UTF-8 ({e})") from None


class EpochService:
    """What the endpoints do, over one IncrementalSession."""

    def __init__(self, session, label: str, log=None, *, factdir: Path | None = None,
                 confine: bool = CONFINE_SERVE, max_queued: int = MAX_QUEUED,
                 include_dirs: tuple = ()) -> None:
        self.session = session
        self.include_dirs = include_dirs  # where a posted program's #include looks
        self.label = label  # the state directory, as status reports it
        self.lock = threading.Lock()  # one epoch at a time; tuple reads wait for it
        self.queue = EpochQueue(self.lock, max_queued)
        self.log = log or sys.stderr
        state = Path(label)
        self.factdir = Path(factdir) if factdir is not None else state / FACTS
        self.outdir = state / OUTPUTS  # serve writes no outputs; `update -D` may, later
        self.confine = confine
        self.stopped = False  # set by stop(): a waiting epoch then applies nothing

    @property
    def queued(self) -> int:
        """Return how many epochs wait for their turn."""
        return self.queue.waiting

    def epoch_request(self, body: bytes):
        """Return a function running the body's diff as one epoch (call it in a turn); raise
        RequestError(400) naming the bad line."""
        from levelflow.engine.incremental.updates import parse_diff

        text, program = _text(body), self.session.program
        ops = parse_diff(program, text, "request")

        def run() -> dict:
            current = self.session.program
            if current is program:
                return self.epoch(ops)
            try:  # a program change ran while this epoch waited: it must fit the new program
                again = parse_diff(current, text, "request")
            except LevelflowError as e:
                raise RequestError(409, f"{str(e).splitlines()[0]} (the program changed "
                                   f"while this epoch waited; nothing applied)") from None
            return self.epoch(again)

        return run

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

    def program_request(self, body: bytes, query: str):
        """Return a function moving the state to the body's program (call it in a turn), or
        raise RequestError(400) with the program's first error or a refused file."""
        from levelflow.engine.incremental.program_change import load_new_program
        from levelflow.engine.incremental.program_text import ProgramText
        from levelflow.engine.paths import check_io_paths, confined_includes

        text = _text(body)
        asked = parse_qs(query, keep_blank_values=True).get("facts", [None])[0]
        facts = self._facts_folder(asked)  # `?facts=` (blank): the fact folder itself
        program = ProgramText(text, "request", self.include_dirs, confined=confined_includes(
            self.confine, (self.factdir, *self.include_dirs), SERVE_FLAGS[2]))
        try:
            pt = load_new_program(program, facts)  # before queuing
            check_io_paths(pt.program, facts or self.factdir, self.outdir, self.confine,
                           SERVE_FLAGS)
        except LevelflowError as e:
            raise RequestError(400, str(e).splitlines()[0]) from None
        return lambda: self.program(program, facts)

    def _facts_folder(self, facts: str | None) -> Path | None:
        """Return the folder `?facts=` names (relative to the fact folder), refused (400) if
        confined and outside it."""
        from levelflow.engine.paths import within

        if facts is None:
            return None
        folder = self.factdir / facts
        if self.confine and not within(folder, self.factdir):
            raise RequestError(400, f"request: error: facts={facts} is outside the fact folder "
                               f"-F {self.factdir} ({SERVE_FLAGS[2]})")
        return folder

    def program(self, new, facts: Path | None) -> dict:
        """Return the answer to moving to a new program (call with the lock held)."""
        s = self.session
        s.discard()
        jobs, t0 = jobs_started(s.spark), time.perf_counter()
        result = s.replace_program(new, facts)
        return {**self._answer(result, jobs, t0), "tasks": dict(sorted(result.status.items()))}

    def stop(self) -> None:
        """Let the running epoch finish, then close the session; later turns are refused."""
        with self.lock:
            self.stopped = True
            self.session.close()

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

        with self.lock:  # after the running epoch: its commit may delete the files read now
            decl = self.session.program.decls[self.relation_name(name)]
            df = self.session.relation(name)
            rows = df.orderBy(*df.columns).collect() if decl.arity else df.limit(1).collect()
        return "".join(format_rows(rows, decl))

    def status(self) -> dict:
        """Return the state, its epoch, the epochs waiting and every relation's size."""
        snap = self.session.snap  # one snapshot: epoch and sizes agree
        return {"state": self.label, "epoch": snap.epoch, "epochs_queued": self.queued,
                "sizes": dict(sorted(snap.rows.items()))}
