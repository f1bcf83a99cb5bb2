"""Off a terminal, a command says nothing of a phase that ends soon and one line of one that
lasts (engine/progress.PhaseLines; the commands wait 5 s, these tests a fraction of it)."""

from __future__ import annotations

import io
import time

from levelflow.engine.progress import PhaseLines, RichProgress, make_progress


def _wait_for(out: io.StringIO, lines: int, timeout: float = 10.0) -> list[str]:
    deadline = time.monotonic() + timeout
    while out.getvalue().count("\n") < lines and time.monotonic() < deadline:
        time.sleep(0.01)
    return out.getvalue().splitlines()


def test_a_phase_that_lasts_gets_one_line_and_a_short_one_none():
    out = io.StringIO()
    progress = PhaseLines(after=0.2, out=out)
    progress.phase("reading facts of edge")
    progress.phase("writing outputs")  # the first phase ended at once: no line for it
    lines = _wait_for(out, 1)
    time.sleep(0.4)  # a phase gets one line however long it lasts
    progress.stop()
    assert len(lines) == 1 and out.getvalue().count("\n") == 1
    assert lines[0].startswith("levelflow: writing outputs (") and lines[0].endswith(" s so far)")


def test_tasks_are_a_phase_and_stop_silences_what_waits():
    out = io.StringIO()
    progress = PhaseLines(after=0.2, out=out)
    progress.start(["a", "b", "c"])
    assert _wait_for(out, 1) == ["levelflow: running tasks (3 in the program) (0 s so far)"]
    progress.phase("writing outputs")
    progress.stop()  # before its line was due
    time.sleep(0.4)
    assert out.getvalue().count("\n") == 1


def test_a_terminal_gets_the_live_line_and_a_pipe_the_phase_lines(monkeypatch):
    from rich.console import Console

    def piped():
        return make_progress(console=Console(file=io.StringIO(), force_terminal=False))

    assert isinstance(make_progress(console=Console(file=io.StringIO(), force_terminal=True)),
                      RichProgress)
    monkeypatch.delenv("LEVELFLOW_PHASE_SECONDS", raising=False)
    assert isinstance(piped(), PhaseLines) and piped().after == 5.0
    monkeypatch.setenv("LEVELFLOW_PHASE_SECONDS", "0.5")
    assert piped().after == 0.5
    assert type(make_progress(quiet=True)).__name__ == "Progress"
