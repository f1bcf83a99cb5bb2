"""Checking and repairing a state directory: what `levelflow state check|repair` do.

A repair never deletes or rewrites anything stored: it commits a new epoch, either a copy of
an older epoch's manifest (its files are shared, not copied) or the program re-evaluated from
scratch on verified base facts. The damaged epoch stays on disk until garbage collection.
"""

from __future__ import annotations

import json
import os
import time
import uuid

from levelflow.engine.incremental.integrity import verify
from levelflow.engine.incremental.state import StateDir, StateError, empty_snapshot
from levelflow.tasks import build_tasks, parse_program


def _program(state: StateDir, data: dict):
    """Return the ProgramTasks of the program a manifest stores."""
    return build_tasks(parse_program(data["program"], data["program_file"]))


def epochs_on_disk(state: StateDir) -> list[int]:
    """Return the epochs with a manifest file, newest first."""
    if not state.epochs.is_dir():
        return []
    return sorted((int(d.name) for d in state.epochs.iterdir()
                   if d.name.isdigit() and (d / "manifest.json").is_file()), reverse=True)


def epoch_problems(spark, state: StateDir, epoch: int, base_only: bool = False) -> list[str]:
    """Return every problem of one epoch's stored relations (its base facts only if asked)."""
    try:
        data = state.manifest(epoch)
        items = state.stored(_program(state, data).program, data)
    except Exception as e:  # noqa: BLE001 - a manifest that does not parse is the problem
        return [str(e).splitlines()[0] if str(e) else f"epoch {epoch}: unreadable manifest"]
    if base_only:
        items = [i for i in items if i.label.startswith("base facts")]
    return verify(spark, items)


def _silent(text: str) -> None:
    """Say nothing (the default of `say`)."""


def check_state(spark, state: StateDir, say=_silent) -> tuple[bool, list[str]]:
    """Return (whether the current epoch is whole, report lines): its problems one a line,
    then each older epoch on disk and whether it verifies. `say(text)` hears how far it got."""
    current = state.current()
    on_disk = epochs_on_disk(state)
    say(f"verifying epoch {current} (the current one, of {len(on_disk)} on disk)")
    problems = epoch_problems(spark, state, current)
    lines = list(problems)
    lines.append(f"{state.path}: epoch {current} (current): "
                 + ("ok" if not problems else f"damaged, {len(problems)} problem(s)"))
    for i, e in enumerate(on_disk, 1):
        if e != current:
            say(f"verifying epoch {e} ({i} of {len(on_disk)} on disk)")
            bad = epoch_problems(spark, state, e)
            lines.append(f"{state.path}: epoch {e}: " + ("ok (`levelflow state repair "
                         f"{state.path} --from-epoch {e}` makes it current again)"
                         if not bad else f"damaged or partly collected ({bad[0]})"))
    return not problems, lines


def restore_epoch(spark, state: StateDir, epoch: int) -> int:
    """Return the new current epoch after committing a copy of verified epoch `epoch`."""
    with state.lock():
        current = state.current()
        if not 0 <= epoch <= current or epoch not in epochs_on_disk(state):
            raise StateError(f"{state.path}: error: no epoch {epoch} on disk (epochs: "
                             f"{', '.join(map(str, epochs_on_disk(state)))})")
        bad = epoch_problems(spark, state, epoch)
        if bad:
            raise StateError(f"{bad[0]}; epoch {epoch} cannot be restored (try --rebuild)")
        data = dict(state.manifest(epoch))
        new = current + 1
        # The copy names epoch `epoch`'s directories, so collection keeps them as long as it.
        data.update(epoch=new, created=time.time(), restored_from=epoch)
        tmp = state.epochs / f".tmp-{new}-{uuid.uuid4().hex[:8]}"
        tmp.mkdir()
        (tmp / "manifest.json").write_text(json.dumps(data, indent=1))
        os.replace(tmp, state.epochs / str(new))
        state.switch(new)
        return new


def rebuild(spark, state: StateDir, epoch: int | None = None, progress=None, **options):
    """Return the EpochResult of re-evaluating the program from scratch on the base facts of
    `epoch` (the current one by default), committed as a new epoch; `progress`
    (engine.progress) shows the tasks as `run` does."""
    from levelflow.engine.evaluate import cut
    from levelflow.engine.incremental.maintain import counted_relations
    from levelflow.engine.incremental.session_api import IncrementalSession
    from levelflow.engine.incremental.versions import Versions

    epoch = state.current() if epoch is None else epoch
    if progress is not None:
        progress.phase(f"verifying the base facts of epoch {epoch}")
    bad = epoch_problems(spark, state, epoch, base_only=True)
    if bad:
        raise StateError(f"{bad[0]}; the base facts of epoch {epoch} cannot be used "
                         f"(rebuild the state from fact files with `levelflow run --state`)")
    data = state.manifest(epoch)
    pt = _program(state, data)
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
