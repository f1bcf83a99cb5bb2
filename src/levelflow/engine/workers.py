"""Worker threads that run tasks as tagged Spark jobs: the engine's workers for the driver.

Constant: the session, the number of slots, the run's job tag and cancel event, the two
callbacks (what a task runs, what its finish means), the deadline.
Changes (main thread only): the free slots, the futures in flight, the schedule rows, the task
whose result is being collected; (the deadline's timer) whether it passed.

Every Spark job a worker starts carries the run's tag, so a failure (or Ctrl-C) stops what is
running by tag: a future's cancel() cannot stop work that has started. Both the from-scratch run
and an incremental epoch go through here, so they cancel alike, and so does a run past its
deadline (`--epoch-timeout`): its timer sets the cancel event, which work in the driver checks
between rounds, and cancels the tagged jobs; the run then raises DeadlinePassed.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait

from levelflow.engine.worker_threads import borrow, give_back, tell
from levelflow.errors import LevelflowError

DEADLINE_POLL = 0.25  # seconds between looks at the deadline while tasks run


class DeadlinePassed(LevelflowError):
    """A run or epoch went past its deadline and was cancelled (callers say which)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"cancelled after {seconds:g} s (--epoch-timeout)")
        self.seconds = seconds


class SparkWorkers:
    """`jobs` worker threads; a context manager that cancels its Spark jobs if the block fails.

    `prepare(v)` runs in the main thread when v starts and returns what a worker calls;
    `finish(v, result, seconds)` runs in the main thread when v is collected and returns the
    children v activated.
    """

    __slots__ = ("spark", "names", "prepare", "finish", "cancel", "tag", "free", "inflight",
                 "pool", "schedule", "t0", "failed", "in_driver", "timeout", "expired", "timer",
                 "jobs_before")

    def __init__(self, spark, jobs: int, names: Sequence[str],
                 prepare: Callable[[int], Callable[[], object]],
                 finish: Callable[[int, object, float], Sequence[int]],
                 cancel: threading.Event | None = None, timeout: float | None = None) -> None:
        self.spark = spark
        self.names = names
        self.prepare = prepare
        self.finish = finish
        self.cancel = cancel or threading.Event()  # told to evaluators that can stop early
        self.tag = f"levelflow-{uuid.uuid4().hex[:12]}"
        self.free = list(range(jobs - 1, -1, -1))  # slots; pop() hands out slot 0 first
        self.inflight: dict[Future, tuple[int, int]] = {}  # future -> (task, slot)
        self.pool = borrow(jobs)  # slot i's tasks run on thread i, one at a time
        self.schedule: list[tuple[int, int, float, float]] = []  # (task, slot, start, end)
        self.t0 = time.perf_counter()
        self.failed: int | None = None  # the task whose result is being collected
        self.in_driver: set[int] = set()  # tasks whose call needs no Spark (`in_driver`)
        self.timeout, self.expired = timeout, False  # seconds from now; whether they passed
        self.timer = None
        # Spark's job counter as the first task that may start a job starts (one py4j call),
        # if Spark runs then (-1 if not): where it has not moved when the tasks are done, none
        # of them started a job, and none is looked up per task. Tasks all in the driver touch
        # no session at all.
        self.jobs_before: int | None = None
        if timeout is not None:
            self.timer = threading.Timer(timeout, self._expire)
            self.timer.daemon = True
            self.timer.start()

    def __enter__(self) -> SparkWorkers:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if self.timer is not None:
            self.timer.cancel()
        # Ctrl-C: a task running in the driver cannot be stopped, and the command exits now:
        # only Spark's tasks are waited for, and the threads are not parked for a later run.
        interrupted = exc_type is not None and issubclass(exc_type, KeyboardInterrupt)
        waited = {f for f, (v, _) in self.inflight.items()
                  if not (interrupted and v in self.in_driver)}
        try:
            if exc_type is not None:
                self.abort(waited)
        finally:
            wait(waited)  # a thread is parked idle (abort waited already)
            if len(waited) == len(self.inflight):
                give_back(self.pool)
        if exc_type is None and self.expired:  # it passed as the last task finished
            raise DeadlinePassed(self.timeout)

    def _expire(self) -> None:
        """The deadline passed (the timer's thread): stop the workers' driver work and jobs."""
        self.expired = True
        self.cancel.set()
        from levelflow.engine.session import session_of, spark_in_use

        if not spark_in_use(self.spark):  # no job ran: nothing to cancel, no JVM to start
            return
        try:
            session_of(self.spark).sparkContext.cancelJobsWithTag(self.tag)
        except Exception:  # noqa: BLE001 - the context may be gone; the run fails anyway
            pass

    def idle(self) -> int:
        """Return the number of free worker slots."""
        return len(self.free)

    def busy(self) -> bool:
        """Return True while a started task has not been collected."""
        return bool(self.inflight)

    def start(self, ready: list[int]) -> None:
        """Submit each ready task to a free slot (none once the deadline passed)."""
        from levelflow.engine.session import jobs_started, spark_in_use

        if self.expired:
            raise DeadlinePassed(self.timeout)
        for v in ready:
            call = self.prepare(v)
            if isinstance(call, in_driver):
                self.in_driver.add(v)
            elif self.jobs_before is None:
                self.jobs_before = jobs_started(self.spark) if spark_in_use(self.spark) else -1
            slot = self.free.pop()
            self.inflight[self.pool[slot].submit(self._run, v, slot, call)] = (v, slot)

    def finished(self):
        """Wait for the first finish; yield (task, activated) per finished task.

        A task's failure is raised here, with `failed` naming it; DeadlinePassed instead once
        the deadline passed (the task's failure is then its cancellation).
        """
        done = set()
        while not done:
            # Look at the deadline between waits, not only at a finish: a job a task submits
            # after the cancel runs on, until abort() (on the way out) cancels it again.
            done, _ = wait(self.inflight, timeout=DEADLINE_POLL if self.timer else None,
                           return_when=FIRST_COMPLETED)
            if self.expired:
                raise DeadlinePassed(self.timeout)
        for fut in done:
            v, slot = self.inflight.pop(fut)
            self.free.append(slot)
            self.failed = v
            out, start, end = fut.result()
            self.failed = None
            self.schedule.append((v, slot, start - self.t0, end - self.t0))
            yield v, self.finish(v, out, end - start)

    def _run(self, v: int, slot: int, call: Callable[[], object]):
        """Return (result, start, end) of one task, run in a worker thread with its jobs tagged
        (a task run in the driver starts none, and does not wait for Spark to start)."""
        from levelflow.engine.session import on_first_use

        if isinstance(call, in_driver):
            start = time.perf_counter()
            return call(), start, time.perf_counter()
        # A session still starting (session.DeferredSession) is told once this task uses it.
        with on_first_use(self.spark, lambda spark: self._tell(spark, v, slot)):
            start = time.perf_counter()
            return call(), start, time.perf_counter()

    def _tell(self, spark, v: int, slot: int) -> None:
        """Set task v's Spark properties on this worker thread's JVM thread."""
        # Local properties live on the JVM thread behind this Python thread, and worker
        # threads do not inherit them, so each task tells its own: the pool and tag only when
        # they changed (the thread runs nothing else, so they stay set until its next task).
        sc = spark.sparkContext
        tell(sc, {"spark.scheduler.pool": f"levelflow-{slot}"}, self.tag)
        # Spark's own job-group calls set or clear these three on the JVM thread (in the full
        # test suite a parked thread lost interruptOnCancel): sent every task, in one call.
        # The group counts the task's jobs; a cancelled run should not wait for long tasks.
        sc.setJobGroup(self.job_group(v), f"levelflow task {self.names[v]}", True)

    def job_group(self, v: int) -> str:
        """Return the Spark job group of task v's jobs under these workers."""
        return f"{self.tag}-task-{v}"

    def spark_jobs(self, tasks) -> dict[int, int]:
        """Return per task the Spark jobs it started (read from Spark's status store; a task
        run in the driver started none)."""
        from levelflow.engine.session import jobs_started, spark_in_use

        tasks = list(tasks)
        if not spark_in_use(self.spark) or self.in_driver.issuperset(tasks) or \
                self.jobs_before is not None and self.jobs_before >= 0 and \
                jobs_started(self.spark) == self.jobs_before:
            return dict.fromkeys(tasks, 0)  # no job at all since these workers started
        # The JVM's array's length: PySpark's tracker fetches each id in a call of its own.
        tracker = self.spark.sparkContext._jsc.statusTracker()
        return {v: 0 if v in self.in_driver else
                len(tracker.getJobIdsForGroup(self.job_group(v))) for v in tasks}

    def abort(self, pending) -> None:
        """Cancel this run's Spark jobs and wait until none of the `pending` futures runs."""
        from levelflow.engine.session import spark_in_use

        self.cancel.set()
        pending = set(pending)
        while pending:
            # Again and again: a worker may submit its next job after a cancel went out.
            try:
                if spark_in_use(self.spark):  # else no job runs: nothing to cancel
                    self.spark.sparkContext.cancelJobsWithTag(self.tag)
            except Exception:  # noqa: BLE001 - the context may be gone; the first error matters
                pass
            pending = wait(pending, timeout=0.5).not_done


class in_driver:  # noqa: N801 - used as a function: in_driver(call)
    """A task's call that runs in the driver: it needs no Spark (plans/driver.py)."""

    __slots__ = ("call",)

    def __init__(self, call: Callable[[], object]) -> None:
        self.call = call

    def __call__(self):
        return self.call()


def one_line(exc: BaseException) -> str:
    """Return the first non-empty line of an exception's message (a JVM error: its root cause;
    an error raised in a Python worker: that error's own line, see `worker_error`)."""
    texts = [str(exc)]
    java = getattr(exc, "java_exception", None)
    if java is not None:
        try:  # py4j's own message is only "An error occurred while calling o42.count"
            while java.getCause() is not None:
                texts.append(str(java.getMessage()))
                java = java.getCause()
            texts.append(str(java.getMessage()))
            exc = Exception(f"{java.getClass().getSimpleName()}: {java.getMessage()}")
        except Exception:  # noqa: BLE001 - the gateway may be gone; fall back to the message
            pass
    for text in texts:
        raised = worker_error(text)
        if raised is not None:
            return raised
    for line in str(exc).splitlines():
        if line.strip():
            return line.strip()
    return type(exc).__name__


# Spark wraps a Python worker's error in its own words and the worker's traceback.
_TRACEBACK = "Traceback (most recent call last):"


def worker_error(text: str) -> str | None:
    """Return the error line of the last Python traceback in `text`, or None if it holds none.

    A levelflow error is its own message (it names the file and line); any other is
    `Type: message`, without Spark's wrapper or the traceback.
    """
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if _TRACEBACK in line]
    if not starts:
        return None
    for line in lines[starts[-1] + 1:]:
        if line.strip() and not line[0].isspace():  # frames are indented; the error is not
            name, sep, message = line.partition(": ")
            if sep and name.startswith("levelflow.") and message.strip():
                return message.strip()
            return f"{name.rsplit('.', 1)[-1]}{sep}{message.strip()}"
    return None


def spark_error_types() -> tuple[type, ...]:
    """Return the exception types a failed Spark job raises."""
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    return (PySparkException, Py4JError)
