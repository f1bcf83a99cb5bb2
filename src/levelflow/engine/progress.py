"""What the dispatch loop reports while it runs: a live rich line on a terminal, one line per
long phase off a terminal (PhaseLines), or nothing.

Constant: the task names and N. Changes: activated / running / done sets, updated by the loop's
main thread only (rich's refresh thread only reads them).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence


class Progress:
    """The reporting hooks the runner calls; this base class reports nothing."""

    def start(self, names: Sequence[str]) -> None:
        """Begin a run over tasks with these names (ids are positions)."""

    def activated(self, tasks: Iterable[int]) -> None:
        """Record tasks the scheduler was told are activated."""

    def started(self, task: int) -> None:
        """Record that a task was handed to a worker."""

    def finished(self, task: int, seconds: float) -> None:
        """Record that a task finished after `seconds` of wall time."""

    def phase(self, text: str) -> None:
        """Show what the run is doing outside task evaluation (e.g. writing outputs)."""

    def watch(self, spark) -> None:
        """Show how far the Spark jobs `spark` is running have got (tasks done of all)."""

    def stop(self) -> None:
        """End the display (also after an error)."""


class RichProgress(Progress):
    """A transient one-line display: tasks done / activated, the running ones, elapsed time."""

    def __init__(self, console=None) -> None:
        from rich.console import Console

        self.console = console or Console()
        self._live = None
        self._names: Sequence[str] = ()
        self._activated: set[int] = set()
        self._running: dict[int, float] = {}
        self._done = 0
        self._phase = ""
        self._t0 = time.perf_counter()
        self._spark = None  # the session watched
        self._tracker = None  # its SparkContext's status tracker, once it is in use

    def start(self, names: Sequence[str]) -> None:
        """Begin a run and start the live display (already live: just take the names)."""
        from rich.live import Live
        from rich.spinner import Spinner

        self._names = names
        if self._live is None:
            self._t0 = time.perf_counter()
            self._spinner = Spinner("dots")
            self._live = Live(self, console=self.console, transient=True, refresh_per_second=4)
            self._live.start()

    def activated(self, tasks: Iterable[int]) -> None:
        """Record activated tasks."""
        self._activated.update(tasks)

    def started(self, task: int) -> None:
        """Record a task handed to a worker."""
        self._running[task] = time.perf_counter()

    def finished(self, task: int, seconds: float) -> None:
        """Record a finished task."""
        self._running.pop(task, None)
        self._done += 1

    def phase(self, text: str) -> None:
        """Show a phase outside task evaluation."""
        self._phase = text

    def watch(self, spark) -> None:
        """Show the running Spark stages' tasks done of all on the line (once Spark is in use:
        a session still starting is not waited for)."""
        self._spark = spark

    def stop(self) -> None:
        """Stop the live display, leaving the terminal clean."""
        if self._live is not None:
            self._live.stop()
            self._live = None

    def render(self):
        """Return the current status line as a rich renderable."""
        from rich.text import Text

        now = time.perf_counter()
        line = Text()
        if self._names:
            line.append(f"{self._done} of {len(self._activated)} activated tasks done",
                        style="bold")
            line.append(f" ({len(self._names)} in all)", style="dim")
        if self._running:
            running = ", ".join(f"{self._names[v]} {now - t:.0f}s"
                                for v, t in sorted(self._running.items()))
            line.append("  running: ")
            line.append(running, style="cyan")
        if self._phase:
            line.append(f"  {self._phase}", style="yellow")
        if (stages := spark_stages(self._status())):
            line.append(f"  Spark: {stages}", style="green")
        line.append(f"  {now - self._t0:.1f}s", style="dim")
        return line

    def _status(self):
        """Return the watched session's status tracker, None until Spark is in use."""
        from levelflow.engine.session import spark_in_use

        if self._tracker is None and self._spark is not None and spark_in_use(self._spark):
            made = getattr(self._spark, "made", None)
            spark = made() if made is not None else self._spark
            if spark is not None:
                self._tracker = spark.sparkContext.statusTracker()
        return self._tracker

    def __rich__(self):
        # Live re-renders on every refresh, so the elapsed times tick without events.
        self._spinner.update(text=self.render())
        return self._spinner


def spark_stages(tracker) -> str:
    """Return 'N of M Spark tasks done' over the active stages ('' if none or unknown)."""
    if tracker is None:
        return ""
    try:  # from the display's thread: the JVM may be busy, or gone after Ctrl-C
        infos = [tracker.getStageInfo(s) for s in tracker.getActiveStageIds()]
    except Exception:  # noqa: BLE001 - a status line must never fail the command
        return ""
    infos = [i for i in infos if i is not None]
    if not infos:
        return ""
    done = sum(i.numCompletedTasks for i in infos)
    total = sum(i.numTasks for i in infos)
    return f"{done} of {total} tasks done in {len(infos)} stage(s)"


class PhaseLines(Progress):
    """Off a terminal: one line on stderr per phase that has lasted `after` seconds (a pipe or
    a log gets no live line, and a short command prints nothing)."""

    def __init__(self, after: float = 5.0, out=None) -> None:
        import threading

        self.after = after
        self.out = out
        self._lock = threading.Lock()
        self._phase = ""
        self._timer = None

    def start(self, names: Sequence[str]) -> None:
        """Begin a run: its tasks are a phase of their own."""
        self.phase(f"running tasks ({len(names)} in the program)")

    def phase(self, text: str) -> None:
        """Begin a phase: its line comes if it is still the phase `after` seconds from now."""
        import threading

        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
            self._phase, self._timer = text, None
            if text:
                self._timer = threading.Timer(self.after, self._say, (text, time.perf_counter()))
                self._timer.daemon = True
                self._timer.start()

    def _say(self, text: str, since: float) -> None:
        import sys

        with self._lock:
            if self._phase == text:
                out = self.out or sys.stderr
                print(f"levelflow: {text} ({time.perf_counter() - since:.0f} s so far)",
                      file=out, flush=True)

    def stop(self) -> None:
        """End the run: a phase still waiting says nothing."""
        self.phase("")


# Off a terminal, a phase gets its line once it has lasted this long (seconds).
PHASE_SECONDS = 5.0
PHASE_ENV = "LEVELFLOW_PHASE_SECONDS"  # overrides it (the test suite waits longer)


def make_progress(quiet: bool = False, console=None) -> Progress:
    """Return a live display when writing to a terminal and not quiet; off a terminal, one
    line on stderr per phase past PHASE_SECONDS (PhaseLines); nothing when quiet."""
    import os

    if quiet:
        return Progress()
    if console is None:
        from rich.console import Console

        console = Console()
    if console.is_terminal:
        return RichProgress(console)
    try:
        after = float(os.environ.get(PHASE_ENV, PHASE_SECONDS))
    except ValueError:
        after = PHASE_SECONDS
    return PhaseLines(after)
