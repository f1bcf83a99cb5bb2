"""CLI commands: serve (hold a state warm and take epochs over local HTTP; see server.py)."""

from __future__ import annotations

import signal
import sys
import tempfile
import threading
from pathlib import Path
from typing import Annotated

import typer

from levelflow.cli import defaults, options
from levelflow.cli.app import app
from levelflow.errors import LevelflowError
from levelflow.serve_service import MAX_QUEUED, REQUEST_TIMEOUT

PORT = 7341
# A served epoch holds up every epoch queued behind it (and their clients), so serve bounds it
# by default: the benches' largest from-scratch runs (10M tuples) take a few seconds on 2
# cores and their epochs well under one, so 300 s leaves a hundredfold margin to real work
# while a runaway epoch (a catastrophic regex, an unbounded recursion) frees the queue within
# 5 minutes. `--epoch-timeout 0` lifts it.
EPOCH_TIMEOUT = 300.0


class ServeArgsError(LevelflowError):
    """A bad flag given to `levelflow serve`, or an address it cannot listen on."""


class _Stop(Exception):  # noqa: N818 - a signal, not an error
    """SIGTERM or Ctrl-C: stop taking requests, finish the running epoch, close."""


def _raise_stop(signum, frame) -> None:
    raise _Stop


def _check_flags(jobs: int, request_timeout: float, max_queued: int,
                 facts: Path | None) -> None:
    """Return None if serve's own flags are valid; else raise one line naming the flag."""
    if facts is not None and not facts.is_dir():
        raise ServeArgsError(f"-F: {facts}: error: fact folder "
                             f"{'is not a directory' if facts.exists() else 'does not exist'}")
    if jobs < 1:
        raise ServeArgsError(f"--jobs: must be a positive integer, got {jobs}")
    if not request_timeout > 0:
        raise ServeArgsError(f"--request-timeout: must be a number of seconds > 0, got "
                             f"{request_timeout}")
    if max_queued < 1:
        raise ServeArgsError(f"--max-queued: must be a positive integer, got {max_queued}")


def _bind(host: str, port: int, request_timeout: float):
    """Return the HTTP server bound to host:port, before Spark starts; one line if it cannot."""
    from levelflow.server import make_server

    if not 0 <= port <= 65535:
        raise ServeArgsError(f"--port: must be 0..65535, got {port}")
    try:
        return make_server(None, host, port,  # type: ignore[arg-type] - set once open
                           request_timeout=request_timeout)
    except OSError as e:
        raise ServeArgsError(f"--host/--port: error: cannot listen on {host}:{port} "
                             f"({e.strerror or e})") from None


def _warn(host: str, no_confine: bool) -> None:
    """Print a warning line for each flag that lets others reach, or files be read."""
    import ipaddress

    try:
        local = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it may resolve to any interface
        local = False
    if not local:
        print(f"levelflow serve: warning: --host {host}: not a loopback address; whoever can "
              f"reach it can change the state and read every relation (no authentication)",
              file=sys.stderr, flush=True)
    if no_confine:
        print("levelflow serve: warning: --no-confine: a client's program may read any file "
              "this process can read and name any .output file", file=sys.stderr, flush=True)


def _listen(server, service, statedir: Path) -> threading.Thread:
    """Start answering requests (before Spark: /status says the state is starting)."""
    server.service = service
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2},
                              name="levelflow-serve", daemon=True)
    thread.start()
    host, port = server.server_address[:2]
    print(f"levelflow serve: listening on http://{host}:{port} (state {statedir}, epoch "
          f"{service.status()['epoch']}; starting Spark)", flush=True)
    return thread


def _serve(server, thread: threading.Thread, service, session) -> None:
    """Serve `session` until SIGTERM or Ctrl-C, then let the running epoch finish and close."""
    previous = {s: signal.signal(s, _raise_stop) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        print(f"levelflow serve: ready (epoch {session.epoch})", flush=True)
        service.opened(session)  # the epochs queued while Spark started run now
        while thread.is_alive():
            thread.join(0.5)  # a signal's handler runs in this thread, between the waits
    except _Stop:
        pass
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        server.shutdown()
        server.server_close()
    service.stop()  # an epoch under way completes (or fails whole) first; none starts after
    print(f"levelflow serve: stopped at epoch {session.epoch}", flush=True)


@app.command("serve")
def serve_command(
    statedir: Annotated[Path, typer.Argument(help="State directory made by `run --state`.")],
    host: Annotated[str, typer.Option("--host", help="Address to listen on (local only by "
                                      "default).")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to listen on; 0 picks a free one "
                                      "(printed).")] = PORT,
    switch: options.Switch = defaults.SWITCH,
    strategy: options.Strategy = defaults.STRATEGY,
    large_change: options.LargeChange = defaults.LARGE_CHANGE,
    scheduler: options.Scheduler = defaults.SCHEDULER,
    jobs: options.Jobs = defaults.JOBS,
    master: options.Master = defaults.MASTER,
    driver_memory: options.DriverMemory = defaults.DRIVER_MEMORY,
    keep_epochs: options.KeepEpochs = None,
    facts: Annotated[Path | None, typer.Option(
        "-F", "--facts", help="Fact folder: a new program's .input files must lie in it, and "
        "/program?facts=DIR names a folder inside it (STATE/facts unless given).")] = None,
    no_confine: Annotated[bool, typer.Option(
        "--no-confine", help="Let a client's program read any file this process can read "
        "(.input) and name any .output file, as `run` does.")] = False,
    request_timeout: Annotated[float, typer.Option(
        "--request-timeout", help="Seconds a request's headers, and its whole body, may take "
        "to arrive (else 408, nothing applied).")] = REQUEST_TIMEOUT,
    max_queued: Annotated[int, typer.Option(
        "--max-queued", help="Epochs that may wait for their turn; a further one gets 503 with "
        "Retry-After.")] = MAX_QUEUED,
    max_tuples: options.MaxTuples = defaults.MAX_TUPLES,
    include: options.IncludeDirs = None,
    epoch_timeout: options.EpochTimeout = EPOCH_TIMEOUT,
) -> None:
    """Hold the state warm; take epochs as HTTP POSTs of diffs (one at a time, the others
    queued); GET relations and sizes. Stops cleanly on SIGTERM or Ctrl-C."""
    from levelflow.cli.run_cmd import scheduler_from_flag
    from levelflow.cli.spark import spark_session
    from levelflow.cli.update_cmd import check_switch
    from levelflow.engine.incremental.session import IncrementalSession
    from levelflow.engine.incremental.state.directory import StateDir
    from levelflow.server import EpochService
    from levelflow.tasks import build_tasks, parse_stored

    check_switch(switch, strategy, large_change)
    _check_flags(jobs, request_timeout, max_queued, facts)
    deadline = options.epoch_deadline(epoch_timeout)
    state = StateDir(statedir, keep=keep_epochs)
    data = state.manifest()  # one line if there is no state
    pt = build_tasks(parse_stored(data["program"], data["program_file"]))
    state.verify(None, pt.program, data, listing=True)  # missing, cut: before Spark
    scheduler_from_flag(scheduler, pt.graph)
    server = _bind(host, port, request_timeout)
    _warn(host, no_confine)
    service = EpochService(None, str(statedir), factdir=facts, confine=not no_confine,
                           max_queued=max_queued, stored=data,
                           include_dirs=tuple(str(d) for d in include or ()))
    thread = _listen(server, service, statedir)
    log = Path(tempfile.mkstemp(prefix="levelflow-spark-", suffix=".log")[1])
    try:
        with spark_session(master, driver_memory, log) as spark:
            session = IncrementalSession.open(spark, state, scheduler=scheduler, jobs=jobs,
                                              mode=strategy, switch=switch,
                                              large_change=large_change,
                                              max_tuples=max_tuples, epoch_timeout=deadline)
            _serve(server, thread, service, session)
    except BaseException as e:  # Spark or the state did not open: what waits is told why
        service.failed(str(e).splitlines()[0] if str(e) else type(e).__name__)
        raise
    finally:
        server.shutdown()
        server.server_close()
        log.unlink(missing_ok=True)
