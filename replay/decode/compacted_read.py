"""``latest_records`` in one read: each Spark task compacts one partition range as it reads it.

A key lives in one partition of a keyed topic, so compaction per (topic, partition, key) needs no
shuffle: a task reads its range compacted through the stream's own protocol
(``EventStream.read_compacted``: per key the newest record and the newest record with a value,
each stream reading them its own way) and ships only those to the JVM (pickled rows). Records
keyed by a truncate key (``truncates.is_truncate_candidate``) are kept one by one. The rows have
the columns and meaning of ``compaction.latest_records``, so ``compaction.decoded_latest`` takes
them as they are, in the same tasks. ``persisted_decode`` goes one step further where it can
(``decoded_survivors``): the task decodes its survivors itself (``survivor_rows``) and ships
decoded rows, so the JVM neither plans nor runs the ``from_json`` decode.

Against the two Spark passes (a hash aggregation of the offsets, then a second read joined
against the winners), this reads the range once and moves no value of a record that compaction
drops. The price is memory: a task holds the newest value of every key of its partition. Past
``task_bytes`` (``$REPLICATOR_COMPACT_TASK_MB``, default 1024) the task stops with
``OverBudget``, and the caller falls back to the two-pass plan, which spills.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import closing
from functools import partial
from typing import Any

from cdc.runtime.record_heap import cycle_collector_paused, return_free_heap
from cdc.streams.protocol import CompactedRange, CompactionOverBudget, StreamRecord
from cdc.streams.registry import open_stream
from replay.decode.changes import ERROR, SOURCE, TXN, VALUE
from replay.decode.compaction import (
    CANDIDATE,
    LIVE_OFFSET,
    LIVE_VALUE,
    TOMBSTONED,
    OverBudget,
    Survey,
    broadcasts_winners,
    decoded_latest,
    latest_records,
    newest_offsets,
    survey,
)
from replay.decode.fallback import decoded_type, positioned
from replay.decode.key_tally import PerRange, per_range_accumulator
from replay.decode.schema import TopicSchema
from replay.decode.survivor_rows import SurvivorDecoder
from replay.decode.task_survey import RangeSurvey, range_key, survey_taken
from replay.decode.truncates import TRUNCATE_KEYS
from replay.reading.plan import PartitionRange, ReplayPlan
from replay.reading.sources import read_records
from replay.spark import DataFrame, F, SparkSession, T, session_confs

LATEST_SCHEMA = T.StructType(
    [
        T.StructField("topic", T.StringType(), False),
        T.StructField("partition", T.IntegerType(), False),
        T.StructField("key", T.BinaryType(), True),
        T.StructField(CANDIDATE, T.LongType(), True),
        T.StructField("offset", T.LongType(), False),
        T.StructField("value", T.BinaryType(), True),
        T.StructField("timestamp_ms", T.LongType(), False),
        T.StructField(LIVE_OFFSET, T.LongType(), True),
        T.StructField(LIVE_VALUE, T.BinaryType(), True),
    ]
)
OVER_BUDGET = "compaction task over its memory budget"
"""In the error of a task that held more than its budget (``is_over_budget`` looks for it)."""
_EACH_KEYS = frozenset(TRUNCATE_KEYS)
_log = logging.getLogger(__name__)


def task_budget_bytes() -> int:
    """The most value bytes one compaction task may hold (``$REPLICATOR_COMPACT_TASK_MB``)."""
    return int(os.environ.get("REPLICATOR_COMPACT_TASK_MB", "1024")) * 1024 * 1024


def is_over_budget(error: BaseException) -> bool:
    """Whether a failed Spark job failed because a compaction task went over its budget."""
    return OVER_BUDGET in str(error)


def compacted_records(
    spark: SparkSession, stream_url: str, plan: ReplayPlan, *, task_bytes: int | None = None
) -> DataFrame:
    """Per (topic, partition, key) the newest record and the newest live one, truncate
    candidates one by one (the columns of ``compaction.latest_records``); one Spark task per
    non-empty range. Persist it: every action would read the stream again."""
    ranges = [r for r in plan.ranges if r.span > 0]
    if not ranges:
        return spark.createDataFrame([], LATEST_SCHEMA)
    budget = task_budget_bytes() if task_bytes is None else task_bytes

    # One range per Spark partition; rows pickled to the JVM as the local log source does
    # (mapInArrow would need pandas, and the rows shipped are only the survivors). A partial of
    # the module's function, not a closure: compiled (mypyc) closures cannot be pickled.
    compact = partial(compact_range, stream_url, budget=budget)
    rdd = spark.sparkContext.parallelize(ranges, len(ranges)).flatMap(compact)
    return spark.createDataFrame(rdd, LATEST_SCHEMA, verifySchema=False)


UNCOMPRESSED_CACHE = {"spark.sql.inMemoryColumnarStorage.compressed": "false"}
"""The one-job rebuild's decode is cached as it is: the survey, the bad-record check and the
write read it within the rebuild, then it is dropped. Its columns' compressibility statistics
(a hash of every string value, per column and batch) cost ~2 s of a first 10 M rebuild's 27 s;
the cache is ~1.45x as large (17.2 MB against 11.9 MB for 98,000 rows, ``bench/README.md``)."""


def persisted_decode(
    spark: SparkSession, stream_url: str, plan: ReplayPlan, schema: TopicSchema, *,
    over_budget: bool = False,
) -> tuple[DataFrame, list[DataFrame], Survey]:  # fmt: skip
    """The plan's records compacted and decoded (``compaction.decoded_latest``), persisted; the
    frames to unpersist after; and what ``compaction.survey`` finds in the decode. In one job
    that reads, compacts and decodes (the compacted values are never cached): where the
    compaction tasks decode (``decoded_survivors``: unless the topic has schema versions or flat
    rows, then ``decode_native`` runs in the same tasks) the job writes nowhere and the tasks
    tell the survey (``task_survey``), else the survey's own job fills the cache. Or by the two
    Spark passes over the plan's records (read by ``reading.sources``) where a compaction task
    would go over its memory budget, or went over it already (``over_budget``). The one-job
    cache is not compressed (``UNCOMPRESSED_CACHE``)."""
    if over_budget:
        return _two_passes(spark, stream_url, plan, schema)
    with session_confs(spark, UNCOMPRESSED_CACHE):  # taken by the cache as it is declared
        findings = None
        if decodes_in_tasks(schema):
            decoded, findings = decoded_survivors(spark, stream_url, plan, schema)
            decoded = decoded.persist()
        else:
            decoded = decoded_latest(compacted_records(spark, stream_url, plan), schema).persist()
    try:
        if findings is None:
            return decoded, [decoded], survey(decoded, schema)
        decoded.write.format("noop").mode("overwrite").save()  # one job: the cache filled
        return decoded, [decoded], survey_taken(findings, plan.ranges)
    except Exception as error:  # a Spark job's error names its cause only in its text
        decoded.unpersist()
        if findings is not None:
            findings.value = {}  # (the session keeps the accumulator)
        if not is_over_budget(error):
            raise
        _log.warning("%s; compacting by two Spark passes instead", over_budget_line(error))
    return _two_passes(spark, stream_url, plan, schema)


def over_budget_line(error: BaseException) -> str:
    """The line of ``error``'s text that says which task went over its budget."""
    return marked_line(error, OVER_BUDGET)


def marked_line(error: BaseException, marker: str) -> str:
    """The last line of ``error``'s text (a failed job's) that holds ``marker`` (a task's own
    error, among Spark's lines), else ``marker``."""
    lines = [line.strip() for line in str(error).splitlines() if marker in line]
    return (lines or [marker])[-1]


def _two_passes(
    spark: SparkSession, stream_url: str, plan: ReplayPlan, schema: TopicSchema
) -> tuple[DataFrame, list[DataFrame], Survey]:
    records = read_records(spark, stream_url, plan)
    newest = newest_offsets(records).persist()
    broadcast = broadcasts_winners(spark, newest)
    latest = latest_records(records, newest, broadcast=broadcast).persist()
    decoded = decoded_latest(latest, schema).persist()
    return decoded, [newest, latest, decoded], survey(decoded, schema)


def decodes_in_tasks(schema: TopicSchema) -> bool:
    """Whether the compaction tasks decode the topic's survivors (``decoded_survivors``)."""
    return schema.native and not schema.versions


def decoded_survivors(
    spark: SparkSession, stream_url: str, plan: ReplayPlan, schema: TopicSchema,
    live_bytes_at_most: int | None = None, *, jvm_positions: bool = True,
) -> tuple[DataFrame, PerRange]:  # fmt: skip
    """``decoded_latest`` of ``compacted_records``, each survivor decoded in the task that kept
    it (``survivor_rows``: no value goes to the JVM undecoded, no ``from_json`` is planned); a
    record's raw value kept only where it is rejected. With the tasks' ``task_survey`` findings
    per range, complete once a job has read the frame whole. A task whose live rows pass
    ``live_bytes_at_most`` (``task_survey``'s count) ships no more: the frame is then cut
    short, its findings say so (``live_bytes``). Without ``jvm_positions`` a row keeps the
    ``__pos`` its task wrote: null where the task was unsure (and said so: ``rejected``)."""
    carry = [T.StructField(TOMBSTONED, T.BooleanType()), T.StructField(CANDIDATE, T.BooleanType())]
    ranges = [r for r in plan.ranges if r.span > 0]
    findings = per_range_accumulator(spark)
    budget = task_budget_bytes()
    decode = partial(decode_range, stream_url, schema, budget=budget, noted=findings,
                     live_bytes_at_most=live_bytes_at_most)  # fmt: skip
    rdd = spark.sparkContext.parallelize(ranges, max(len(ranges), 1)).flatMap(decode)
    shipped = spark.createDataFrame(rdd, decoded_type(schema, carry), verifySchema=False)
    rows = positioned(shipped, schema, shipped=True) if jvm_positions else shipped
    kept = F.when(F.col(ERROR).isNotNull(), F.col(VALUE))
    return rows.withColumn(VALUE, kept).drop(SOURCE, TXN), findings


def decode_range(
    stream_url: str, schema: TopicSchema, r: PartitionRange, budget: int, noted: PerRange,
    live_bytes_at_most: int | None = None,
) -> Iterator[tuple[Any, ...]]:  # fmt: skip
    """The decoded survivors of one range (rows of ``decoded_survivors``; in a Spark task)."""
    most = -1 if live_bytes_at_most is None else live_bytes_at_most
    decoder = SurvivorDecoder(schema)
    survey = RangeSurvey(schema)
    for row in compact_range(stream_url, r, budget):
        topic, partition, key, candidate, offset, _, _, live_offset, live_value = row
        if live_offset is None:
            continue
        origin = (topic, partition, live_offset, key)
        decoded = decoder.row(origin, live_value, (offset != live_offset, candidate is not None))
        if decoded is not None:
            yield survey.add(decoded)
            if survey.live_bytes > most >= 0:
                break
    noted.add({range_key(r): survey.findings()})


def compact_range(stream_url: str, r: PartitionRange, budget: int) -> Iterator[tuple[Any, ...]]:
    """The compacted rows of one range (``LATEST_SCHEMA`` tuples; runs in a Spark task)."""
    topic, partition = r.tp.topic, r.tp.partition
    kept = CompactedRange({}, {}, [])
    try:
        with closing(open_stream(stream_url)) as stream:
            try:
                kept = stream.read_compacted(
                    topic, partition, r.start, r.stop,
                    each_keys=_EACH_KEYS, max_held_bytes=budget,
                )  # fmt: skip
            except CompactionOverBudget as over:
                raise OverBudget(
                    f"{OVER_BUDGET}: {topic} partition {partition} holds {over.held_bytes >> 20} "
                    f"MB of newest values after {over.records:,} records (budget {budget >> 20} "
                    "MB, $REPLICATOR_COMPACT_TASK_MB)"
                ) from None
        # The rows (and a decoder's values) make no cycles; collections would walk every held
        # record (``record_heap``).
        with cycle_collector_paused():
            yield from _compacted_rows(r, kept.live, kept.gone, kept.each)
    finally:
        # The worker process outlives the task (Python workers are reused) and would keep the
        # freed values' heap for the rest of the replay, beside the JVM's peak.
        kept.live.clear()
        kept.gone.clear()
        kept.each.clear()
        return_free_heap()


def _compacted_rows(
    r: PartitionRange,
    live: dict[bytes, StreamRecord],
    gone: dict[bytes, StreamRecord],
    each: list[StreamRecord],
) -> Iterator[tuple[Any, ...]]:
    topic, partition = r.tp.topic, r.tp.partition
    for key, alive in live.items():
        rec = gone.pop(key, alive) if gone else alive
        yield (
            topic,
            partition,
            key,
            None,
            rec.offset,
            None,  # the live value once (``__live_value``), as ``latest_records`` has it
            rec.timestamp_ms,
            alive.offset,
            alive.value,
        )
    for key, rec in gone.items():  # keys that never had a value in the range
        yield (topic, partition, key, None, rec.offset, None, rec.timestamp_ms, None, None)
    for rec in each:
        live_offset = None if rec.value is None else rec.offset
        yield (
            topic,
            partition,
            rec.key,
            rec.offset,
            rec.offset,
            rec.value,
            rec.timestamp_ms,
            live_offset,
            rec.value,
        )
