"""Raw change records of a plan as a Spark DataFrame, from Kafka or the embedded local log.

Every source yields the same columns: ``topic``, ``partition``, ``offset``, ``key`` (binary),
``value`` (binary, null for tombstones), ``timestamp_ms``.

A plan of at most ``driver_read_offsets()`` offsets (a ``--follow`` round, a catch-up) is read
by the driver through the stream's own protocol and handed to Spark as an Arrow table, unless
its records hold more than ``driver_read_bytes()``: Spark's Kafka source costs about a second per
job in consumer set-up and task scheduling, which a replay of a thousand changes would pay in
each of its jobs, and it reads the stream once per job where the driver reads it once per plan.
A read of many records is handed over spread over the cores (``local_frame``), since Spark's
optimizer evaluates the operators over a small hand-off (a local relation) on the driver,
interpreted. A decoder's read hands Connect-JSON values over without the schema text they
repeat (``cut_prefix``, ``VALUE_HEAD``, ``whole_value``): a 25,000-change ``--follow`` round
into Delta ~0.6 s shorter on two cores.
"""

from __future__ import annotations

import json
import os
import time
from collections import defaultdict
from collections.abc import Generator, Mapping, Sequence
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from cdc.streams.protocol import EventStream, StreamRecord, TopicPartition
from cdc.streams.registry import open_stream
from replay.driver_frames import local_frame
from replay.reading.kafka_options import java_client_options
from replay.reading.plan import PartitionRange, ReplayPlan
from replay.spark import Column, DataFrame, F, SparkSession, T

RAW_SCHEMA = T.StructType(
    [
        T.StructField("topic", T.StringType(), False),
        T.StructField("partition", T.IntegerType(), False),
        T.StructField("offset", T.LongType(), False),
        T.StructField("key", T.BinaryType(), True),
        T.StructField("value", T.BinaryType(), True),
        T.StructField("timestamp_ms", T.LongType(), False),
    ]
)
VALUE_HEAD = "__value_head"
"""A column of a frame ``read_records`` handed over with ``cut_prefix``: the text cut off the
front of ``value`` (null where nothing was); ``whole_value`` joins the two again."""
_PAYLOAD_OPENING = b'{"payload":'  # what a cut value starts with instead of its schema text
_CUT_SCHEMA = T.StructType([*RAW_SCHEMA.fields, T.StructField("__cut", T.BooleanType(), True)])
_last_read: tuple[Any, float, list[tuple[Any, ...]] | None] | None = None
_last_frame: tuple[list[tuple[Any, ...]], SparkSession, str | None, DataFrame] | None = None
_REUSE_S = 30.0
_SPREAD_ROWS, _SPREAD_BYTES = 20_000, 16 << 20
"""From this many records, or values of this many bytes, a driver read is handed to Spark spread
over the cores (``local_frame``): decoded by a job, not interpreted by the optimizer."""


def read_records(
    spark: SparkSession, stream_url: str, plan: ReplayPlan, *, cut_prefix: str | None = None
) -> DataFrame:
    """The committed records in the plan's ranges (empty ranges are skipped).

    ``cut_prefix``: the schema text of JsonConverter's layout (``{"schema":...,"payload":``) a
    decoder skips anyway (``replay.decode.schema.value_prefix``). A driver read then hands the
    values that start with it over without it (``{"payload":...``, ~5x smaller for a typical
    Debezium table) and adds ``VALUE_HEAD``; only for a reader that restores what it shows of
    a value (``whole_value``), as the decoder does for a rejected record."""
    ranges = [r for r in plan.ranges if r.span > 0]
    if not ranges:
        return spark.createDataFrame([], RAW_SCHEMA)
    local = driver_rows(stream_url, plan)
    if local is not None:
        global _last_frame
        # The same read's frame again (each job of a round asks): handing 10,000 records to
        # the JVM costs ~0.15 s each time.
        last = _last_frame
        if last is None or last[0] is not local or last[1] is not spark or last[2] != cut_prefix:
            spread = spark.sparkContext.defaultParallelism if _worth_spreading(local) else 0
            frame = _handed_over(spark, local, cut_prefix, spread)
            _last_frame = last = (local, spark, cut_prefix, frame)
        return last[3]
    parts = urlsplit(stream_url)
    scheme = parts.scheme
    if scheme == "kafka":
        client = java_client_options(dict(parse_qsl(parts.query)))
        return _kafka_records(spark, parts.netloc, ranges, client)
    if scheme == "local":
        from replay.reading.local_log import local_log_records

        return local_log_records(spark, stream_url, ranges)
    raise ValueError(f"no Spark source for stream {stream_url!r} (kafka:// or local://)")


def _handed_over(
    spark: SparkSession, rows: list[tuple[Any, ...]], cut_prefix: str | None, spread: int
) -> DataFrame:
    if not cut_prefix:
        return local_frame(spark, rows, RAW_SCHEMA, spread=spread)
    head = cut_prefix.encode()
    skip = len(head)
    cut = [
        (t, p, o, k, _PAYLOAD_OPENING + v[skip:], ms, True)
        if v is not None and v.startswith(head)
        else (t, p, o, k, v, ms, None)
        for t, p, o, k, v, ms in rows
    ]
    frame = local_frame(spark, cut, _CUT_SCHEMA, spread=spread)
    restore = F.when(F.col("__cut"), F.lit(bytearray(head))).alias(VALUE_HEAD)
    return frame.select(*RAW_SCHEMA.fieldNames(), restore)


def joined_value(value: Column, head: Column) -> Column:
    """A value as the stream holds it, from a cut one and its ``VALUE_HEAD``."""
    rest = F.substring(value, len(_PAYLOAD_OPENING) + 1, 2**31 - 1)
    return F.when(head.isNull(), value).otherwise(F.concat(head, rest))


def whole_value(records: DataFrame) -> Column:
    """The ``value`` column of ``read_records``'s frame as the stream holds it."""
    if VALUE_HEAD not in records.columns:
        return F.col("value")
    return joined_value(F.col("value"), F.col(VALUE_HEAD))


def whole_records(records: DataFrame) -> DataFrame:
    """``read_records``'s frame with its values as the stream holds them (RAW_SCHEMA)."""
    if VALUE_HEAD not in records.columns:
        return records
    return records.withColumn("value", whole_value(records)).drop(VALUE_HEAD)


def _worth_spreading(rows: list[tuple[Any, ...]]) -> bool:
    # Measured on Connect-JSON values of 3.4 KB, 2 cores: 3,000 records are handed over faster
    # as a local relation, 5,000 about as fast either way, 10,000 0.3 s faster spread.
    if len(rows) >= _SPREAD_ROWS:
        return True
    return len(rows) >= 1_000 and sum(len(r[4] or b"") for r in rows) >= _SPREAD_BYTES


def driver_read_offsets() -> int:
    """Plans of at most this many offsets are read by the driver
    (``$REPLICATOR_DRIVER_READ_OFFSETS``, default 100,000; 0 reads every plan on the executors)."""
    return int(os.environ.get("REPLICATOR_DRIVER_READ_OFFSETS", "100000"))


def driver_read_bytes() -> int:
    """A driver read stops, and leaves the plan to the executors, past this many bytes of keys
    and values (``$REPLICATOR_DRIVER_READ_BYTES``, default 384 MiB): the driver holds them
    about four times over while it hands them to Spark."""
    return int(os.environ.get("REPLICATOR_DRIVER_READ_BYTES", str(384 << 20)))


def read_ranges(
    stream: EventStream, ranges: Sequence[PartitionRange]
) -> Generator[StreamRecord, None, None]:
    """The committed records of ``ranges`` through one reader of ``stream`` (partitions
    interleaved, each in offset order)."""
    stops = {r.tp: r.stop for r in ranges if r.span > 0}
    if not stops:
        return
    reader = stream.reader({r.tp: r.start for r in ranges if r.span > 0})
    left = set(stops)
    try:
        while left:
            batch = reader.poll(10_000, 1.0)
            topic, partition, stop = "", -1, 0
            for record in batch:
                # A poll returns runs of one partition: look its stop up once per run.
                if record.partition != partition or record.topic != topic:
                    topic, partition = record.topic, record.partition
                    stop = stops[TopicPartition(topic, partition)]
                if record.offset < stop:
                    yield record
            # Done where the reader's position (its next offset) reached the stop: past the
            # last record, or past offsets without records (a transaction's commit marker,
            # compaction) once it has read them. Checked after every poll, not only empty ones:
            # the partition's end may have come with the last records, and a quiet stream would
            # then hold the next poll for its timeout.
            left -= {tp for tp in left if reader.position(tp.topic, tp.partition) >= stops[tp]}
    finally:
        reader.close()


def read_by_driver(stream_url: str, plan: ReplayPlan) -> bool:
    """Whether ``read_records`` hands the plan's records over from the driver (a local frame:
    reading it again costs no stream read, so a caller need not cache what it decodes)."""
    return driver_rows(stream_url, plan) is not None


def driver_rows(stream_url: str, plan: ReplayPlan) -> list[tuple[Any, ...]] | None:
    """The RAW_SCHEMA rows of a plan the driver reads (within ``driver_read_offsets`` and
    ``driver_read_bytes``), else None. The rows of the last read are kept a few seconds: the
    jobs and checks of one round ask for them again."""
    ranges = [r for r in plan.ranges if r.span > 0]
    if sum(r.span for r in ranges) > driver_read_offsets():
        return None
    global _last_read, _last_frame
    wanted = (stream_url, tuple((r.tp, r.start, r.stop) for r in ranges))
    fresh = _last_read is not None and time.monotonic() - _last_read[1] < _REUSE_S
    if _last_read is None or _last_read[0] != wanted or not fresh:
        _last_read = _last_frame = None  # the previous round's records go before these come
        _last_read = (wanted, time.monotonic(), _read_within(stream_url, ranges))
    return _last_read[2]


def _read_within(stream_url: str, ranges: list[PartitionRange]) -> list[tuple[Any, ...]] | None:
    """The rows of ``ranges``; None as soon as they hold more than ``driver_read_bytes``."""
    budget, rows = driver_read_bytes(), []
    stream = open_stream(stream_url)
    records = read_ranges(stream, ranges)
    try:
        for r in records:
            budget -= len(r.value or b"") + len(r.key or b"")
            if budget < 0:
                return None
            rows.append((r.topic, r.partition, r.offset, r.key, r.value, r.timestamp_ms))
    finally:
        records.close()
        stream.close()
    return rows


def _kafka_records(
    spark: SparkSession,
    bootstrap: str,
    ranges: list[PartitionRange],
    overrides: Mapping[str, str] | None = None,
) -> DataFrame:
    assign: dict[str, list[int]] = defaultdict(list)
    starting: dict[str, dict[str, int]] = defaultdict(dict)
    ending: dict[str, dict[str, int]] = defaultdict(dict)
    for r in ranges:
        assign[r.tp.topic].append(r.tp.partition)
        starting[r.tp.topic][str(r.tp.partition)] = r.start
        ending[r.tp.topic][str(r.tp.partition)] = r.stop
    options: dict[str, Any] = {
        "kafka.bootstrap.servers": bootstrap,
        "assign": json.dumps(assign),
        "startingOffsets": json.dumps(starting),
        "endingOffsets": json.dumps(ending),
        "kafka.isolation.level": "read_committed",
        # Compaction and transaction markers leave offsets without records; the plan reports
        # real gaps (retention) before the read, so Spark must not fail on those holes.
        "failOnDataLoss": "false",
        "minPartitions": str(max(2, spark.sparkContext.defaultParallelism * 2)),
        # A range ending in a transaction marker has no record left to fetch at its end: the
        # broker then holds each fetch for fetch.max.wait.ms (500 by default) before the task
        # sees the range is done. Where data is waiting, a fetch returns at once regardless.
        "kafka.fetch.max.wait.ms": "25",
        **(overrides or {}),
    }
    df = spark.read.format("kafka").options(**options).load()
    return df.select(
        F.col("topic"),
        F.col("partition"),
        F.col("offset"),
        F.col("key"),
        F.col("value"),
        F.unix_millis(F.col("timestamp")).alias("timestamp_ms"),
    )
