"""CLI commands: shell (an interactive prompt over a maintained program; stdin may be piped)."""

from __future__ import annotations

import signal
import sys
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer

from levelflow.cli import defaults, options
from levelflow.cli.app import app
from levelflow.engine.paths import CONFINE_DEFAULT
from levelflow.errors import LevelflowError

CONFINE_HELP = ("Refuse an .input file outside -F, symbolic links followed (off by default, as "
                "in Soufflé, where filename= may name any path).")
HELP = """\
commands:
  insert R(1,"a")   queue a fact to insert into input relation R
  remove R(1,"a")   queue a fact to remove from input relation R
  commit            apply the queued changes as one epoch
  load NEW.dl       move to program NEW.dl (with the queued changes) as one epoch
  print R           print relation R (Soufflé format, sorted)
  size R            print the number of tuples of R
  help              this text
  quit              leave (uncommitted changes are discarded); also exit or Ctrl-D
Ctrl-C at the prompt cancels the line being typed; during a command it ends the shell."""


class Shell:
    """The prompt's command interpreter over an IncrementalSession (I/O passed in)."""

    def __init__(self, session, out=None, err=None, source: str | None = None,
                 prompt: bool = False) -> None:
        self.session = session
        self.prompt = prompt  # show `levelflow> ` before each line (a terminal)
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.source = source  # e.g. "<stdin>": errors then name the line they come from
        self.lineno = 0
        self.errors = 0

    @property
    def where(self) -> str:
        """Return what an error names as its place: `<stdin>:LINE`, or `<shell>` at a prompt."""
        return f"{self.source}:{self.lineno}" if self.source else "<shell>"

    def say(self, text: str) -> None:
        print(text, file=self.out)

    def error(self, text: str) -> None:
        """Print an error line and count it (a piped script with errors exits 1)."""
        self.errors += 1
        print(text, file=self.err)

    def execute(self, line: str) -> bool:
        """Run one command line; return False when the shell should stop."""
        self.lineno += 1
        line = line.strip()
        if not line or line.startswith(("//", "#")):
            return True
        word, _, rest = line.partition(" ")
        word, rest = word.strip(), rest.strip()
        if "(" in word:  # `insert(...)` is not a command; `insert r(1)` is
            word, rest = line, ""
        try:
            return self._dispatch(word, rest)
        except LevelflowError as e:
            self.error(str(e))
        except KeyError as e:
            self.error(f"{self.where}: error: {e.args[0]}")
        except Exception as e:
            if not type(e).__module__.startswith(("pyspark", "py4j")):
                raise
            # A failed Spark job (lost files, an out-of-memory executor): the shell stays up.
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            self.error(f"{self.where}: error: Spark failed: {first}")
        return True

    def _dispatch(self, word: str, rest: str) -> bool:
        from levelflow.engine.incremental.updates import parse_literal

        s = self.session
        if word in ("quit", "exit"):
            return False
        if word == "help":
            self.say(HELP)
        elif word in ("insert", "remove"):
            name, row = parse_literal(s.program, rest, self.where)
            present = s.has_base(name, row)
            queued = any(op.relation == name and op.row == row for op in s.pending)
            shown = f"{name}({', '.join(map(repr, row))})".replace("'", '"')
            if word == "insert" and present:
                why = "already queued for insertion" if queued else "already there"
                self.say(f"note: {shown} is {why}; nothing to insert")
            elif word == "remove" and not present:
                why = "already queued for removal" if queued else "not there"
                self.say(f"note: {shown} is {why}; nothing to remove")
            else:
                (s.insert if word == "insert" else s.remove)(name, row)
        elif word == "commit":
            from levelflow.cli.update_cmd import print_epoch

            print_epoch(s.commit(), s.program, self.out)
        elif word == "load":
            self._load(rest)
        elif word in ("print", "size"):
            name = rest.strip()
            if name not in s.program.decls:
                self.error(f"{self.where}: error: unknown relation {name!r}")
            elif word == "size":
                self.say(str(s.size(name)))
            else:
                self._print(name)
        else:
            self.error(f"{self.where}: error: unknown command {word!r} (try help)")
        return True

    def _print(self, name: str) -> None:
        """Print relation `name` sorted, in Soufflé's format; rows the driver holds need no
        Spark."""
        from levelflow.engine.facts import format_rows, held_lines
        from levelflow.engine.incremental.backends.driver_rows import rows_of

        decl = self.session.program.decls[name]
        table = rows_of(self.session.snap.tuples(name))
        if table is not None:
            held_lines(table, decl, self.out)
            return
        df = self.session.relation(name)
        rows = df.orderBy(*df.columns).collect() if decl.arity else df.limit(1).collect()
        self.out.writelines(format_rows(rows, decl))

    def _load(self, path: str) -> None:
        """Move the session to the program at `path` (a bad program: one error line)."""
        from levelflow.cli.update_cmd import print_epoch

        if not path:
            self.error(f"{self.where}: error: load needs a program file (load NEW.dl)")
            return
        result = self.session.replace_program(path)
        print_epoch(result, self.session.program, self.out)

    def loop(self, lines) -> None:
        """Run commands from an iterable of lines until quit or the end of input.

        At a prompt, Ctrl-C while waiting for a line cancels that line, as Python's REPL does:
        the session and its warm state stay.
        """
        while True:
            if self.prompt:
                self.out.write("levelflow> ")
                self.out.flush()
            try:
                with _idle_sigint(self.prompt):
                    line = lines.readline() if hasattr(lines, "readline") else next(lines, "")
            except KeyboardInterrupt:
                if not self.prompt:
                    raise
                self.out.write("\nKeyboardInterrupt\n")
                continue
            if not line:
                break
            if not self.execute(line):
                break
        if self.session.pending:
            self.say(f"note: {len(self.session.discard())} uncommitted change(s) discarded")


@contextmanager
def _idle_sigint(prompt: bool):
    """While the prompt waits for a line, let Ctrl-C raise KeyboardInterrupt without ending the
    JVM (the CLI's own handler ends it, for Ctrl-C during a command)."""
    if not prompt or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _open(spark, program_tasks, factdir: Path, state, resume: bool, flags: dict, progress):
    """Return the IncrementalSession the prompt works on: resumed, or bootstrapped (epoch 0)."""
    from levelflow.engine.incremental.session import IncrementalSession

    opts = {"switch": flags["switch"], "mode": flags["strategy"],
            "large_change": flags["large_change"], "scheduler": flags["scheduler"],
            "jobs": flags["jobs"], "max_tuples": flags["max_tuples"]}
    if resume:
        return IncrementalSession.open(spark, state, progress=progress, **opts)
    return IncrementalSession.bootstrap(spark, program_tasks, factdir, state, progress=progress,
                                        **opts)


@app.command("shell")
@options.binds_functors
def shell_command(
    program: Annotated[Path, typer.Argument(
        help="The Datalog program (.dl), or a state directory to resume with its program.")],
    factdir: Annotated[Path, typer.Option(
        "-F", "--fact-dir", help="Directory of the .input fact files (epoch 0).")] = Path("."),
    state: Annotated[Path | None, typer.Option(
        "--state", help="Keep (or resume) the maintained state in this directory.")] = None,
    switch: options.Switch = defaults.SWITCH,
    strategy: options.Strategy = defaults.STRATEGY,
    large_change: options.LargeChange = defaults.LARGE_CHANGE,
    scheduler: options.Scheduler = defaults.SCHEDULER,
    jobs: options.Jobs = defaults.JOBS,
    keep_epochs: options.KeepEpochs = None,
    master: options.Master = defaults.MASTER,
    driver_memory: options.DriverMemory = defaults.DRIVER_MEMORY,
    confine: Annotated[bool, typer.Option("--confine", help=CONFINE_HELP)] = CONFINE_DEFAULT,
    max_tuples: options.MaxTuples = defaults.MAX_TUPLES,
    functors: options.Functors = None,
) -> None:
    """Interactive prompt: insert / remove / commit / load / print / size / help / quit."""
    from levelflow.cli.run_cmd import scheduler_from_flag
    from levelflow.cli.update_cmd import check_session_flags
    from levelflow.engine.incremental.state.directory import StateDir, StateError
    from levelflow.engine.paths import check_io_paths, confined_includes
    from levelflow.engine.runner import check_fact_files
    from levelflow.tasks import build_tasks, load_program, parse_stored

    flags = {"switch": switch, "strategy": strategy, "large_change": large_change,
             "scheduler": scheduler, "jobs": jobs, "keep_epochs": keep_epochs,
             "max_tuples": max_tuples}
    check_session_flags(flags, master)
    if state is None and program.is_dir() and StateDir(program).exists():
        state = program  # `shell STATE`, as `update` and `serve` take it: its own program
        data = StateDir(state).manifest()
        program_tasks = build_tasks(parse_stored(data["program"], data["program_file"]))
    else:
        program_tasks = build_tasks(load_program(
            program, confined=confined_includes(confine, (factdir,))))
    scheduler_from_flag(scheduler, program_tasks.graph)  # checked before Spark starts
    if state is not None:
        StateDir(state).check_usable()
    resume = state is not None and StateDir(state).exists()
    if resume:
        if StateDir(state).manifest()["program"] != program_tasks.program.source:
            raise StateError(f"{state}: error: the state's current program is not {program} "
                             f"(it was made by, or has since loaded, another one)")
    else:
        check_io_paths(program_tasks.program, factdir, None, confine)
        for warning in check_fact_files(program_tasks.program, factdir):
            print(warning, file=sys.stderr)
    statedir = StateDir(state, keep=keep_epochs) if state is not None else None
    _run_prompt(program_tasks, factdir, statedir, resume, flags, master, driver_memory)


def _run_prompt(program_tasks, factdir: Path, statedir, resume: bool, flags: dict,
                  master: str, driver_memory: str) -> None:
    """Start Spark, open or bootstrap the session with a live line, then run the prompt."""
    from levelflow.cli.spark import spark_session
    from levelflow.engine.progress import make_progress

    log = Path(tempfile.mkstemp(prefix="levelflow-spark-", suffix=".log")[1])
    progress = make_progress()  # a live line on a terminal until the prompt is up
    try:
        progress.start(program_tasks.graph.names)
        progress.phase(f"starting Spark ({master})")
        with spark_session(master, driver_memory, log) as spark:
            progress.watch(spark)
            progress.phase("resuming the state" if resume else "evaluating epoch 0")
            session = _open(spark, program_tasks, factdir, statedir, resume, flags, progress)
            progress.stop()
            print(f"epoch {session.epoch}: "
                  f"{session.last.summary() if session.last else 'resumed'}"
                  f"; type help for commands")
            terminal = sys.stdin.isatty()
            shell = Shell(session, source=None if terminal else "<stdin>", prompt=terminal)
            shell.loop(sys.stdin)
    finally:
        progress.stop()
        log.unlink(missing_ok=True)
    if shell.errors and shell.source:  # piped: every line ran, but a failed one fails the run
        raise typer.Exit(1)
