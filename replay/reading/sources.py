"""Raw change records of a plan as a Spark DataFrame, from Kafka or the embedded local log.

Every source yields the same columns: ``topic``, ``partition``, ``offset``, ``key`` (binary),
``value`` (binary, null for tombstones), ``timestamp_ms``.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any
from urllib.parse import urlsplit

from replay.reading.plan import PartitionRange, ReplayPlan
from replay.spark import DataFrame, F, SparkSession, T

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


def read_records(spark: SparkSession, stream_url: str, plan: ReplayPlan) -> DataFrame:
    """The committed records in the plan's ranges (empty ranges are skipped)."""
    ranges = [r for r in plan.ranges if r.span > 0]
    if not ranges:
        return spark.createDataFrame([], RAW_SCHEMA)
    scheme = urlsplit(stream_url).scheme
    if scheme == "kafka":
        return _kafka_records(spark, urlsplit(stream_url).netloc, ranges)
    if scheme == "local":
        from replay.reading.local_log import local_log_records

        return local_log_records(spark, stream_url, ranges)
    raise ValueError(f"no Spark source for stream {stream_url!r} (kafka:// or local://)")


def _kafka_records(spark: SparkSession, bootstrap: str, ranges: list[PartitionRange]) -> DataFrame:
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
