"""Each checkpoint write of the async PostgreSQL saver in one statement, serialised on the event loop.

langgraph's ``AsyncPostgresSaver`` writes a checkpoint as one ``INSERT`` per changed channel plus one for
the checkpoint, and a task's writes as one ``INSERT`` per written channel, pipelined; it serialises them on a
worker thread. A turn of the agent graph writes about ninety such rows in twenty-three calls. Per row, psycopg
spends Python time sending and reading a pipelined query, and per call, the thread hand-off contends for the
interpreter lock with everything else the process runs: on two cores that was most of a turn's checkpoint
cost, not the database. Here each call is one statement whose rows arrive as arrays (``unnest``), so a
call costs one query and one round trip whatever the number of channels. The rows, their conflict rules and
their atomicity are langgraph's (one statement is one transaction, as the pipeline was), so langgraph and
the dev server read them as they read their own.

The values are serialised inline: a turn's channel values are small (a bounded conversation's new messages,
decisions, a plan), so it costs less than the hand-off to a thread that would serialise them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from psycopg.rows import DictRow
from psycopg.types.json import Jsonb

# The changed channels' blobs and the checkpoint row together: a data-modifying CTE always runs.
PUT_CHECKPOINT = """
WITH blobs AS (
    INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob)
    SELECT %(thread_id)s, %(ns)s, b.channel, b.version, b.type, b.blob
    FROM unnest(%(channels)b::text[], %(versions)b::text[], %(types)b::text[], %(blobs)b::bytea[])
        AS b(channel, version, type, blob)
    ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING
)
INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata)
VALUES (%(thread_id)s, %(ns)s, %(id)s, %(parent)s, %(checkpoint)s, %(metadata)s)
ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id)
DO UPDATE SET checkpoint = EXCLUDED.checkpoint, metadata = EXCLUDED.metadata
"""
_PUT_WRITES = """
INSERT INTO checkpoint_writes
    (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, blob)
SELECT %(thread_id)s, %(ns)s, %(id)s, %(task_id)s, %(task_path)s, w.idx, w.channel, w.type, w.blob
FROM unnest(%(idx)b::int[], %(channels)b::text[], %(types)b::text[], %(blobs)b::bytea[])
    AS w(idx, channel, type, blob)
ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO
"""
#: Special writes (errors, interrupts, resumes) replace an earlier write at their index; others never do.
UPSERT_WRITES = (
    _PUT_WRITES + " UPDATE SET channel = EXCLUDED.channel, type = EXCLUDED.type, blob = EXCLUDED.blob"
)
INSERT_WRITES = _PUT_WRITES + " NOTHING"


class OneStatementWrites(AsyncPostgresSaver):
    """``aput`` and ``aput_writes`` as one statement each; ``aget_tuple`` decodes without a thread hop."""

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Save a checkpoint and its changed channels' values in one statement (langgraph's rows)."""
        configurable = config.get("configurable") or {}  # without it the thread_id below is what is missing
        thread_id, ns = configurable["thread_id"], configurable["checkpoint_ns"]
        copy = checkpoint.copy()
        values = copy["channel_values"] = dict(checkpoint["channel_values"])
        blob_values: dict[str, Any] = {}
        for key, value in checkpoint["channel_values"].items():
            # Primitives stay inline in the checkpoint's JSON; a delta snapshot is stored as a blob.
            if isinstance(value, _DeltaSnapshot):
                blob_values[key] = values.pop(key)
                values[key] = True
            elif not (value is None or isinstance(value, (str, int, float, bool))):
                blob_values[key] = values.pop(key)
        versions = {k: v for k, v in new_versions.items() if k in blob_values}
        rows = self._dump_blobs(thread_id, ns, blob_values, versions)
        params = {
            "thread_id": thread_id,
            "ns": ns,
            "id": checkpoint["id"],
            "parent": configurable.get("checkpoint_id"),
            "checkpoint": Jsonb(copy),
            "metadata": Jsonb(get_serializable_checkpoint_metadata(config, metadata)),
            "channels": [r[2] for r in rows],
            "versions": [r[3] for r in rows],
            "types": [r[4] for r in rows],
            "blobs": [r[5] for r in rows],
        }
        async with self._cursor() as cur:
            await cur.execute(PUT_CHECKPOINT, params)
        at = {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": checkpoint["id"]}
        return {"configurable": at}

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's writes in one statement (langgraph's rows and conflict rules)."""
        configurable = config.get("configurable") or {}  # without it the thread_id below is what is missing
        rows = self._dump_writes(
            configurable["thread_id"],
            configurable["checkpoint_ns"],
            configurable["checkpoint_id"],
            task_id,
            task_path,
            writes,
        )
        indexes = [r[5] for r in rows]
        if not rows or len(set(indexes)) < len(indexes):  # one statement cannot write a row twice
            await super().aput_writes(config, writes, task_id, task_path)
            return
        upsert = all(w[0] in WRITES_IDX_MAP for w in writes)
        params = {
            "thread_id": configurable["thread_id"],
            "ns": configurable["checkpoint_ns"],
            "id": configurable["checkpoint_id"],
            "task_id": task_id,
            "task_path": task_path,
            "idx": indexes,
            "channels": [r[6] for r in rows],
            "types": [r[7] for r in rows],
            "blobs": [r[8] for r in rows],
        }
        async with self._cursor() as cur:
            await cur.execute(UPSERT_WRITES if upsert else INSERT_WRITES, params)

    async def _load_checkpoint_tuple(self, value: DictRow) -> CheckpointTuple:
        """The checkpoint tuple of a row, as langgraph builds it, its pending writes decoded inline."""

        def at(checkpoint_id: str) -> RunnableConfig:
            ids = {"thread_id": value["thread_id"], "checkpoint_ns": value["checkpoint_ns"]}
            return {"configurable": {**ids, "checkpoint_id": checkpoint_id}}

        stored = value["checkpoint"]
        channel_values = {**(stored.get("channel_values") or {}), **self._load_blobs(value["channel_values"])}
        return CheckpointTuple(
            at(value["checkpoint_id"]),
            {**stored, "channel_values": channel_values},  # type: ignore[typeddict-item]
            value["metadata"],
            at(value["parent_checkpoint_id"]) if value["parent_checkpoint_id"] else None,
            self._load_writes(value["pending_writes"]),
        )
