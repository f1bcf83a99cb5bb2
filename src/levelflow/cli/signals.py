"""Make a signal the kernel hands to any thread interrupt the main thread's blocking call.

Linux delivers a process-directed SIGINT (Ctrl-C, `kill -INT`) to any thread that does not
block it. Python runs the handler only in the main thread, and only once that thread runs
bytecode again: a main thread waiting on a lock (a task running in the driver for a minute) or
on a socket (a Spark call) slept through Ctrl-C until that wait ended. Python's own handler
writes each signal's number to the wakeup fd from whichever thread got it; a relay thread
reading that fd nudges the main thread with a signal of its own, whose handler does nothing:
the nudge ends the main thread's wait with EINTR, and Python then runs the pending handlers,
SIGINT's among them. A nudge after the main thread got the signal itself is harmless.

One nudge was not always enough: under load the main thread sometimes slept on through it
(in the suite, 30-55 s, once in a few hundred Ctrl-Cs). The nudge's handler says that it ran
(the pending SIGINT's handler runs before it), and the relay nudges again until it has.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

RELAYED = (signal.SIGINT, signal.SIGTERM)
NUDGE = signal.SIGUSR2  # nothing else in levelflow uses it
NUDGE_EVERY = 0.2  # seconds between nudges until the main thread ran the handlers
NUDGES = 100


@contextmanager
def signals_reach_main() -> Iterator[None]:
    """Relay SIGINT and SIGTERM to the main thread for the block (main thread only)."""
    main = threading.main_thread()
    if threading.current_thread() is not main:
        yield
        return
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)  # the wakeup fd must never block a signal handler
    handled, ending = threading.Event(), threading.Event()
    previous_nudge = signal.signal(NUDGE, lambda signum, frame: handled.set())
    previous_fd = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)

    def relay() -> None:
        while data := os.read(read_end, 64):
            if any(n in RELAYED for n in data):
                handled.clear()
                for _ in range(NUDGES):
                    if ending.is_set():
                        return
                    signal.pthread_kill(main.ident, NUDGE)
                    if handled.wait(NUDGE_EVERY):
                        break

    thread = threading.Thread(target=relay, name="levelflow-signal-relay", daemon=True)
    thread.start()
    try:
        yield
    finally:
        signal.set_wakeup_fd(previous_fd)
        ending.set()
        os.close(write_end)  # the relay's read sees the end and returns
        thread.join(1.0)
        # Only now: a nudge under SIGUSR2's default action would end the process.
        signal.signal(NUDGE, previous_nudge)
        os.close(read_end)
