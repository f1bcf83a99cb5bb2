"""Structured Streaming into an incremental session: each micro-batch one epoch, exactly once.

    query = levelflow.streaming.maintain(changes_df, session, op_column="op",
                                         checkpoint="chk/edges")
    query.awaitTermination()

A micro-batch's rows are changes to one input relation: the relation's columns (by attribute
name or position) plus `op_column`, holding +1/-1 (or insert/delete, +/-). Per tuple the batch's
markers are summed: positive inserts it, negative removes it, zero leaves it as it was. The
batch is applied as one epoch, and its id is recorded in that epoch's manifest, in the same
atomic commit: a batch Spark replays after a crash or restart (its id not above the recorded
one) is skipped. A batch that does not fit its relation stops the query with one line, the state
as it was before it.
Constant: the session and the stream's name. Nothing else is kept between batches.
"""

from __future__ import annotations

from collections.abc import Callable

DEFAULT_NAME = "default"


def batch_function(session, relation: str | None = None, op_column: str = "op", *,
                   name: str = DEFAULT_NAME, on_epoch=None) -> Callable:
    """Return the `foreachBatch(df, batch_id)` function applying micro-batches to `session`.

    `relation`: the input relation the stream changes (None: the program's only one).
    `name` keys the stream's last batch id in the state's manifest (one per query: keep it,
    and the query's checkpoint, across restarts). `on_epoch(batch_id, result)` is told of each
    epoch applied.
    """
    from levelflow.engine.spark_io import InputError

    if relation is None:
        if len(session.program.inputs) != 1:
            raise InputError(f"stream: error: {session.program.file} has "
                             f"{len(session.program.inputs)} input relations; name one with "
                             f"relation=")
        relation = next(iter(session.program.inputs))

    def apply_batch(df, batch_id: int) -> None:
        from levelflow.engine.incremental.frame_changes import ops_of_batch

        if batch_id <= session.streams.get(name, -1):
            return  # applied before a crash or restart: its epoch already holds it
        if session.pending:
            raise InputError(f"stream {name}: error: the session has {len(session.pending)} "
                             f"pending ops; commit or discard them before streaming")
        session.extend(ops_of_batch(session.program, relation, df, op_column))
        try:
            result = session.commit(streams={name: int(batch_id)})
        except BaseException:
            session.discard()  # the batch comes again when the query restarts
            raise
        if on_epoch is not None:
            on_epoch(batch_id, result)

    return apply_batch


def maintain(stream_df, session, op_column: str = "op", *, relation: str | None = None,
             checkpoint: str | None = None, name: str = DEFAULT_NAME, trigger: dict | None = None,
             on_epoch=None):
    """Return the started StreamingQuery applying each micro-batch of `stream_df` as an epoch.

    `checkpoint` is the query's checkpoint location (Spark needs one to resume where it
    stopped); `trigger` the `DataStreamWriter.trigger` options (e.g. {"availableNow": True}).
    """
    writer = stream_df.writeStream.foreachBatch(
        batch_function(session, relation, op_column, name=name, on_epoch=on_epoch))
    if checkpoint is not None:
        writer = writer.option("checkpointLocation", str(checkpoint))
    if trigger:
        writer = writer.trigger(**trigger)
    return writer.start()
