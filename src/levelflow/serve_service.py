"""What `levelflow serve`'s endpoints do, over one IncrementalSession; no HTTP here.

Epochs (diffs and program changes) take a ticket once their request is read and checked whole,
and run one at a time in ticket order; at most `max_queued` wait, a further one is refused
(503). An epoch is checked again against the program current when its turn comes (a program
change may have run while it waited). A new program's `.input` files must lie in the fact
folder and its `.output` files in the output folder (engine.paths), unless confinement is off;
so must its `#include`d files, in the fact folder or an `--include-dir` folder: any other is
refused by its name before it is read.
The service answers before its session is open (`serve` listens while Spark starts): /status
then says it is starting, and epochs and reads wait in their turn until `opened`.
Reads of tuples do not wait for a running epoch: each holds the state's READERS lock shared
while it reads, so no commit or compaction deletes the files of the snapshot it reads.
Constant: the folders, the bound; the session once open. Changes: the session's snapshot and
program, one epoch at a time; the tickets.
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
    """What the endpoints do, over one IncrementalSession (None until `opened`)."""

    def __init__(self, session, label: str, log=None, *, factdir: Path | None = None,
                 confine: bool = CONFINE_SERVE, max_queued: int = MAX_QUEUED,
                 include_dirs: tuple = (), stored: dict | None = None) -> None:
        self.session = session
        # Until the session is open: the stored state's manifest (its program, epoch, sizes).
        self.stored = stored
        self._program = None
        self.ready = threading.Event()  # the session is open, or will never be (`failure`)
        self.failure: str | None = None
        if session is not None:
            self.ready.set()
        self.include_dirs = include_dirs  # where a posted program's #include looks
        self.label = label  # the state directory, as status reports it
        self.lock = threading.Lock()  # one epoch (or compaction) at a time
        self.queue = EpochQueue(self.lock, max_queued)
        self.log = log or sys.stderr
        state = Path(label)
        self.factdir = Path(factdir) if factdir is not None else state / FACTS
        self.outdir = state / OUTPUTS  # serve writes no outputs; `update -D` may, later
        self.confine = confine
        self.stopped = False  # set by stop(): a waiting epoch then applies nothing

    def opened(self, session) -> None:
        """Serve `session` from now on: the epochs and reads waiting for it go ahead."""
        self.session = session
        self.ready.set()

    def failed(self, why: str) -> None:
        """The session will not open: what waits for it, and what comes, gets 503 and `why`."""
        self.failure = why
        self.ready.set()

    def wait_open(self):
        """Return the session once it is open (waiting for it); 503 if it never will be."""
        self.ready.wait()
        if self.session is None:
            raise RequestError(503, f"request: error: the server did not start ({self.failure})"
                               f"; nothing applied")
        return self.session

    @property
    def program(self):
        """Return the program requests are checked against: the session's, or the stored one."""
        if self.session is not None:
            return self.session.program
        if self._program is None:
            from levelflow.tasks import build_tasks, parse_program

            data = self.stored
            self._program = build_tasks(parse_program(data["program"],
                                                      data["program_file"])).program
        return self._program

    @property
    def queued(self) -> int:
        """Return how many epochs wait for their turn."""
        return self.queue.waiting

    def epoch_request(self, body: bytes):
        """Return a function running the body's diff as one epoch (call it in a turn); raise
        RequestError(400) naming the bad line."""
        from levelflow.engine.incremental.updates import parse_diff

        text, program = _text(body), self.program
        ops = parse_diff(program, text, "request")

        def run() -> dict:
            current = self.wait_open().program
            if current is program:
                return self.epoch(ops)
            try:  # a program change, or the session's open, came while this epoch waited
                again = parse_diff(current, text, "request")
            except LevelflowError as e:
                raise RequestError(409, f"{str(e).splitlines()[0]} (the program changed "
                                   f"while this epoch waited; nothing applied)") from None
            return self.epoch(again)

        return run

    def epoch(self, ops: list) -> dict:
        """Return the answer to an epoch of `ops` (call with the lock held)."""
        s = self.wait_open()
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
        return lambda: self.change_program(program, facts)

    def _facts_folder(self, facts: str | None) -> Path | None:
        """Return the folder `?facts=` names (relative to the fact folder), refused (400) if
        confined and outside it."""
        from levelflow.engine.paths import within

        if facts is None:
            return None
        if "\0" in facts:  # no path holds one: the OS would refuse it
            raise RequestError(400, f"request: error: facts={facts!r} holds a NUL character")
        folder = self.factdir / facts
        if self.confine and not within(folder, self.factdir):
            raise RequestError(400, f"request: error: facts={facts} is outside the fact folder "
                               f"-F {self.factdir} ({SERVE_FLAGS[2]})")
        return folder

    def change_program(self, new, facts: Path | None) -> dict:
        """Return the answer to moving to a new program (call with the lock held)."""
        s = self.wait_open()
        s.discard()
        jobs, t0 = jobs_started(s.spark), time.perf_counter()
        result = s.replace_program(new, facts)
        return {**self._answer(result, jobs, t0), "tasks": dict(sorted(result.status.items()))}

    def stop(self) -> None:
        """Let the running epoch finish, then close the session; later turns are refused."""
        with self.lock:
            self.stopped = True
            if self.session is not None:
                self.session.close()

    def compact(self) -> None:
        """Fold chains past the policy (call with the lock held); a failure is only logged."""
        try:
            self.session.compact()
        except LevelflowError as e:
            print(f"levelflow serve: {e}", file=self.log, flush=True)

    def relation_name(self, name: str) -> str:
        """Return `name` if the program declares it; else raise RequestError(404)."""
        if name not in self.program.decls:
            raise RequestError(404, f"error: unknown relation {name!r}")
        return name

    def size(self, name: str) -> int:
        """Return the size of relation `name` (once the session is open)."""
        session = self.wait_open()
        return session.snap.rows[self.relation_name(name)]

    def tuples(self, name: str) -> str:
        """Return a relation's tuples as an output file holds them (sorted, tab-separated),
        while an epoch may run: no commit deletes the files read meanwhile."""
        from levelflow.engine.facts import format_rows
        from levelflow.engine.spark_io import named

        session = self.wait_open()
        with session.statedir.reading():  # taken before the snapshot, so its files stay
            snap, program = session.snap, session.program
            decl = program.decls[self.relation_name(name)]
            df = named(decl, snap.tuples(name))
            rows = df.orderBy(*df.columns).collect() if decl.arity else df.limit(1).collect()
        return "".join(format_rows(rows, decl))

    def status(self) -> dict:
        """Return the state, its epoch, the epochs waiting and every relation's size; before
        the session is open, those of the stored state and `starting`."""
        if self.session is None:
            data = self.stored
            sizes = {n: info["rows"] for n, info in data["relations"].items()}
            return {"state": self.label, "starting": self.failure is None,
                    "epoch": int(data["epoch"]), "epochs_queued": self.queued,
                    "sizes": dict(sorted(sizes.items()))}
        snap = self.session.snap  # one snapshot: epoch and sizes agree
        return {"state": self.label, "starting": False, "epoch": snap.epoch,
                "epochs_queued": self.queued, "sizes": dict(sorted(snap.rows.items()))}
