"""The ``--on-error`` policy for records that are not valid change events.

``fail`` stops the replay before anything of the batch is written, naming the first bad record
(topic, partition, offset) and why. ``dead-letter`` writes the bad records, with the reason, to
the sink table ``_replicator_dead_letters`` (keyed by topic, partition, offset, so a retried batch
rewrites the same rows) before the batch's data: nothing is silently dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from cdc.errors import ChangeEventError
from cdc.streams.protocol import TopicPartition
from replay.sinks.protocol import (
    DEAD_LETTER_TABLE,
    OP,
    OP_UPSERT,
    POS,
    TRUNCATED,
    Sink,
    TableSpec,
)
from replay.spark import DataFrame, F

DeadLetterPolicy = Literal["fail", "dead-letter"]
_SPEC = TableSpec(DEAD_LETTER_TABLE, ("topic", "partition", "offset"))


def handle_bad_records(
    sink: Sink,
    bad: DataFrame,
    policy: DeadLetterPolicy,
    positions: Mapping[TopicPartition, int],
    table: str,
) -> int:
    """Apply ``policy`` to ``bad`` (``topic, partition, offset, key, value, reason``); returns
    how many records were dead-lettered. Raises ``ChangeEventError`` under ``fail``."""
    # Origins only: the reason may need a Python UDF (a Python worker per task), which column
    # pruning then leaves out of this check; it runs only once a bad record is there.
    origins = bad.select("topic", "partition", "offset")
    first = origins.orderBy("topic", "partition", "offset").limit(1).collect()
    if not first:
        return 0
    if policy == "fail":
        row = bad.orderBy("topic", "partition", "offset").first()  # now with its reason
        assert row is not None
        # The parser's reason may name the record's origin already: the error names it once.
        origin = f" at topic {row['topic']}, partition {row['partition']}, offset {row['offset']}"
        raise ChangeEventError(
            f"bad change event for table {table}: {row['reason'].removesuffix(origin)} "
            "(use --on-error dead-letter to set such records aside and go on)",
            topic=row["topic"], partition=row["partition"], offset=row["offset"],
        )  # fmt: skip
    rows = bad.select(
        "topic",
        "partition",
        "offset",
        "key",
        "value",
        "reason",
        F.lit(table).alias("target_table"),
        F.lit(OP_UPSERT).alias(OP),
        F.format_string("%05d%020d", "partition", "offset").alias(POS),
        F.lit(False).alias(TRUNCATED),
    ).persist()
    count = rows.count()
    # The ledger of the dead-letter table moves with each batch that had bad records, so a
    # retried batch is skipped there as well.
    sink.merge(_SPEC, rows, {TopicPartition(f"{table}:{tp.topic}", tp.partition): o
                             for tp, o in positions.items()}, rows_at_most=count)  # fmt: skip
    rows.unpersist()
    return count
