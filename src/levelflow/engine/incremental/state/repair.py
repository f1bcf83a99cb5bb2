"""Checking and repairing a state directory: what `levelflow state check|repair` do.

Checking, restoring an epoch and recovering a damaged CURRENT read the Parquet and JSON files
with pyarrow (integrity.verify) and start no Spark; only a rebuild evaluates the program.
A repair never deletes or rewrites anything stored: it makes a whole epoch current (CURRENT
switched to it, or a copy of an older epoch's manifest committed: its files are shared, not
copied) or commits the program re-evaluated from scratch on verified base facts. The damaged
epoch stays on disk until garbage collection.
A damaged CURRENT (missing, empty, or naming a manifest its epoch did not commit) is recovered
to the last acknowledged epoch: the newest whole one whose commit completed (files.py:
its COMMITTED names its manifest). An epoch written but never made current is not: it was
never acknowledged, and only `--from-epoch N` makes it current.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from levelflow.engine.incremental.state.errors import StateError
from levelflow.engine.incremental.state.files import COMMITTED, StateFiles
from levelflow.engine.incremental.state.garbage import referenced
from levelflow.engine.incremental.state.integrity import verify
from levelflow.tasks import build_tasks, parse_stored

if TYPE_CHECKING:
    from levelflow.engine.incremental.state.directory import StateDir


def _program(data: dict):
    """Return the ProgramTasks of the program a manifest stores."""
    return build_tasks(parse_stored(data["program"], data["program_file"]))


def _first_line(e: Exception, epoch: int) -> str:
    return str(e).splitlines()[0] if str(e) else f"epoch {epoch}: unreadable manifest"


def epoch_problems(state: StateFiles, epoch: int, base_only: bool = False) -> list[str]:
    """Return every problem of one epoch's stored relations (its base facts only if asked)."""
    try:
        data = state.manifest(epoch)
        items = state.stored(_program(data).program, data)
    except Exception as e:  # noqa: BLE001 - a manifest that does not parse is the problem
        return [_first_line(e, epoch)]
    if base_only:
        items = [i for i in items if i.label.startswith("base facts")]
    return verify(items)


def _silent(text: str) -> None:
    """Say nothing (the default of `say`)."""


@dataclass
class Survey:
    """The epochs on disk, newest first, down to the last committed whole one (`last`)."""

    problems: dict[int, list[str]] = field(default_factory=dict)  # verified: epoch -> problems
    committed: set[int] = field(default_factory=set)
    last: int | None = None


def survey(state: StateFiles, say=_silent) -> Survey:
    """Return the epochs on disk verified newest first, down to the newest one whose commit
    completed and whose files are whole: the last acknowledged epoch."""
    out = Survey()
    on_disk = state.on_disk()
    for i, epoch in enumerate(on_disk, 1):
        say(f"verifying epoch {epoch} ({i} of {len(on_disk)} on disk)")
        out.problems[epoch] = epoch_problems(state, epoch)
        try:
            if state.committed(epoch, state.manifest(epoch)):
                out.committed.add(epoch)
        except StateError:
            pass
        if epoch in out.committed and not out.problems[epoch]:
            out.last = epoch
            break
    return out


def check_state(state: StateFiles, say=_silent) -> tuple[bool, list[str], str | None]:
    """Return (whether the current epoch is whole, report lines, the error line when it is
    not): its problems one a line, then each other epoch on disk: whole, collected, damaged,
    or newer than CURRENT. A damaged CURRENT is reported with the epoch a repair recovers.
    `say(text)` hears how far it got."""
    problem = state.current_problem()
    if problem is not None:
        return _check_without_current(state, problem, say)
    current = state.current()
    on_disk = state.on_disk()
    say(f"verifying epoch {current} (the current one, of {len(on_disk)} on disk)")
    problems = epoch_problems(state, current)
    lines = list(problems)
    lines.append(f"{state.path}: epoch {current} (current): "
                 + ("ok" if not problems else f"damaged, {len(problems)} problem(s)"))
    try:
        named = set().union(*(referenced(d) for d in state.kept()[1]))
    except StateError:
        named = set()  # the current manifest is damaged: nothing counts as collected
    for i, e in enumerate(on_disk, 1):
        if e == current:
            continue
        say(f"verifying epoch {e} ({i} of {len(on_disk)} on disk)")
        collected, bad = older_epoch_problems(state, e, named)
        whole = (f"ok (`levelflow state repair {state.path} --from-epoch {e}` makes it "
                 f"current again)")
        if e > current:
            whole = (f"newer than CURRENT (epoch {current}): written but never made current "
                     f"(a commit killed before its switch) or CURRENT was rolled back; "
                     f"`levelflow state repair {state.path} --from-epoch {e}` makes it "
                     f"current, the next update sets it aside")
        lines.append(f"{state.path}: epoch {e}: " + _status(collected, bad, whole))
    lines += _asides(state)
    advice = None if not problems else (
        f"{state.path}: error: the current epoch is damaged; repair it with "
        f"`levelflow state repair {state.path}` (see above)")
    return not problems, lines, advice


def _status(collected: int, bad: list[str], whole: str) -> str:
    return (f"damaged ({bad[0]})" if bad else
            f"collected (garbage collection deleted {collected} of its directories, as "
            f"it does for epochs past the ones kept)" if collected else whole)


def _asides(state: StateFiles) -> list[str]:
    return [f"{state.path}: {aside}: an epoch set aside by a commit (it was newer than "
            f"CURRENT); delete it once it is not needed"
            for aside in sorted(p.name for p in state.epochs.glob(".aside-*"))]


def _check_without_current(state: StateFiles, problem: str, say
                           ) -> tuple[bool, list[str], str]:
    """Return check_state's answer for a damaged CURRENT: every epoch's status, and which
    one `state repair` makes current."""
    path = state.path
    found = survey(state, say)
    # A state written before levelflow kept COMMITTED has none: its epochs are not "never
    # made current", their commits are just not recorded.
    records = any((state.epochs / str(e) / COMMITTED).is_file() for e in state.on_disk())
    unrecorded = ("never made current (no COMMITTED names its manifest: a commit killed "
                  "before its switch)" if records else
                  "no commit record (the state was written before levelflow kept them)")
    lines = [f"{path / 'CURRENT'}: error: {problem}"]
    for e, bad in found.problems.items():
        if e == found.last:
            lines.append(f"{path}: epoch {e}: ok, the last committed epoch")
        elif e in found.committed:
            lines.append(f"{path}: epoch {e}: committed, damaged ({bad[0]})")
        else:
            lines.append(f"{path}: epoch {e}: {unrecorded}; " + (
                f"damaged ({bad[0]})" if bad else
                f"whole (`levelflow state repair {path} --from-epoch {e}` makes it current)"))
    if found.last is not None:
        named = _named_from(state, found.last)
        for e in state.on_disk():
            if e < found.last:
                say(f"verifying epoch {e}")
                collected, bad = older_epoch_problems(state, e, named)
                whole = (f"ok (`levelflow state repair {path} --from-epoch {e}` makes it "
                         f"current)")
                lines.append(f"{path}: epoch {e}: " + _status(collected, bad, whole))
    lines += _asides(state)
    if found.last is not None:
        advice = (f"`levelflow state repair {path}` makes epoch {found.last} current again "
                  f"(the last committed)")
        lines.append(f"{path}: {advice}")
        return False, lines, f"{path}: error: {problem}; {advice}"
    whole = [e for e, bad in found.problems.items() if not bad]
    return False, lines, f"{path}: error: {problem}; " + _no_committed(path, whole)


def _no_committed(path, whole: list[int]) -> str:
    """Return what to do when no whole epoch records its commit."""
    return "no whole epoch on disk records its commit; " + (
        f"`levelflow state repair {path} --from-epoch {whole[0]}` makes epoch {whole[0]} "
        f"current (check that it is the one you want)" if whole else
        "rebuild the state from fact files with `levelflow run --state`")


def _named_from(state: StateFiles, epoch: int) -> set[str]:
    """Return the directories the manifests of the epochs garbage collection keeps with
    `epoch` current name."""
    data = state.manifest(epoch)
    named = referenced(data)
    for e in range(epoch - 1, max(epoch - state.keep_epochs(data), -1), -1):
        try:
            named |= referenced(state.manifest(e))
        except StateError:
            pass
    return named


def older_epoch_problems(state: StateFiles, epoch: int, named: set[str]
                         ) -> tuple[int, list[str]]:
    """Return (directories garbage collection deleted, other problems) of a non-current
    epoch: a missing directory no kept manifest names was collected, not damaged."""
    try:
        data = state.manifest(epoch)
        items = state.stored(_program(data).program, data)
    except Exception as e:  # noqa: BLE001 - a manifest that does not parse is the problem
        return 0, [_first_line(e, epoch)]
    gone = [i for i in items if not i.path.is_dir()
            and relative(state, i.path) not in named]
    rest = [i for i in items if i not in gone]
    return len(gone), verify(rest)


def relative(state: StateFiles, path) -> str:
    """Return a stored directory as `referenced` names it: `<epoch>/<kind>/<name>`."""
    return path.relative_to(state.epochs).as_posix()


def recover(state: StateFiles, say=_silent) -> tuple[str, int] | None:
    """Return (what was wrong with CURRENT, the epoch made current) after switching CURRENT
    to the last acknowledged epoch, when CURRENT is damaged; None when it is not."""
    with state.lock():
        problem = state.current_problem()
        if problem is None:
            return None
        found = survey(state, say)
        if found.last is None:
            whole = [e for e, bad in found.problems.items() if not bad]
            raise StateError(f"{state.path / 'CURRENT'}: error: {problem}; "
                             + _no_committed(state.path, whole))
        # Epochs newer than it stay where they are: the next commit sets them aside.
        state.switch(found.last)
        return problem, found.last


def restore_epoch(state: StateFiles, epoch: int) -> int:
    """Return the new current epoch after committing a copy of verified epoch `epoch`, or,
    for a verified epoch newer than CURRENT (or any, when CURRENT is damaged), after making
    it current."""
    with state.lock():
        current = None if state.current_problem() is not None else state.current()
        on_disk = state.on_disk()
        if epoch < 0 or epoch == current or epoch not in on_disk:
            raise StateError(f"{state.path}: error: no epoch {epoch} on disk besides the "
                             f"current one (epochs: {', '.join(map(str, on_disk))})")
        bad = epoch_problems(state, epoch)
        if bad:
            raise StateError(f"{bad[0]}; epoch {epoch} cannot be restored (try --rebuild)")
        if current is None or epoch > current:  # whole, never switched to (or CURRENT lost)
            state.switch(epoch)
            return epoch
        data = dict(state.manifest(epoch))
        data.pop("compacted_from", None)  # the copy replaces no manifest
        new = max(on_disk) + 1  # never over an epoch on disk
        # The copy names epoch `epoch`'s directories, so collection keeps them as long as it.
        data.update(epoch=new, created=time.time(), restored_from=epoch)
        tmp = state.epochs / f".tmp-{new}-{uuid.uuid4().hex[:8]}"
        tmp.mkdir()
        state.switch(new, state.publish(tmp, new, data))
        return new


def rebuild(spark, state: StateDir, epoch: int | None = None, progress=None, **options):
    """Return the EpochResult of re-evaluating the program from scratch on the base facts of
    `epoch` (the current one by default), committed as a new epoch; `progress`
    (engine.progress) shows the tasks as `run` does."""
    from levelflow.engine.evaluate import cut
    from levelflow.engine.incremental.session import IncrementalSession
    from levelflow.engine.incremental.state.snapshot import empty_snapshot
    from levelflow.engine.incremental.strategies.counting_spark import counted_relations
    from levelflow.engine.incremental.versions import Versions

    epoch = state.current() if epoch is None else epoch
    if progress is not None:
        progress.phase(f"verifying the base facts of epoch {epoch}")
    bad = epoch_problems(state, epoch, base_only=True)
    if bad:
        raise StateError(f"{bad[0]}; the base facts of epoch {epoch} cannot be used "
                         f"(rebuild the state from fact files with `levelflow run --state`)")
    data = state.manifest(epoch)
    pt = _program(data)
    if progress is not None:
        progress.start(pt.graph.names)
        progress.phase(f"re-evaluating the program on the base facts of epoch {epoch}")
    old = state.load(spark, pt.program, check=False, epoch=epoch)
    snap = empty_snapshot(spark, pt.program, counted_relations(pt))
    snap.epoch = state.current()  # the epoch this one follows, as a session's writer expects
    base = {}
    for name in pt.program.inputs:
        ver = Versions(pt.program.decls[name], snap.base[name], 0)
        if old.base_rows[name]:
            df, rows = cut(old.base[name])
            ver.set_change(df, rows, df, rows, None, 0)
        base[name] = ver
    state.hold_readers_lock()
    session = IncrementalSession(spark, pt, data["program"], snap, state, **options)
    with session._writing():
        return session._run_epoch(base, bootstrap=True, progress=progress)
