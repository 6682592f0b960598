"""Decode and fast-path compaction throughput on synthetic PostgreSQL events (a measurement).

Run from the repository root: ``.venv/bin/python -m tests.replay.decode.decode_throughput``.
The records are JsonConverter values with schema (``{"schema": <Envelope>, "payload": ...}``,
about 2.3 kB each: decimal, timestamps, text, source block with LSN and sequence), generated on
the JVM from ``spark.range`` so the driver holds none of them. Each figure is the best of
``--runs`` full passes (a ``noop`` write of every row) after a warm-up pass, with the driver
JVM's CPU time per record (other processes on the machine do not skew that one); the
generation pass alone is measured too: the decode rates include it.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from typing import Any

from cdc.streams.local import LocalLog
from cdc.streams.protocol import TopicPartition
from replay.decode.changes import decode_native
from replay.decode.compaction import decoded_latest, latest_records, rebuild_table
from replay.decode.fallback import decode_python
from replay.decode.schema import TopicSchema
from replay.reading.local_log import local_log_records
from replay.reading.plan import PartitionRange
from replay.spark import DataFrame, F, SparkSession, spark_session

_COLUMNS = [
    {"type": "int64", "optional": False, "field": "id"},
    {"type": "string", "optional": True, "field": "name"},
    {"type": "bytes", "optional": True, "name": "org.apache.kafka.connect.data.Decimal",
     "version": 1, "parameters": {"scale": "2", "connect.decimal.precision": "12"},
     "field": "balance"},
    {"type": "int64", "optional": True, "name": "io.debezium.time.MicroTimestamp", "version": 1,
     "field": "created"},
    {"type": "string", "optional": True, "name": "io.debezium.time.ZonedTimestamp", "version": 1,
     "field": "updated"},
    {"type": "boolean", "optional": True, "field": "active"},
    {"type": "string", "optional": True, "field": "note"},
]  # fmt: skip
_SOURCE = [{"type": "string", "optional": o, "field": f} for f, o in
           [("version", False), ("connector", False), ("name", False), ("db", False),
            ("sequence", True), ("schema", False), ("table", False)]] + [
    {"type": "int64", "optional": o, "field": f}
    for f, o in [("ts_ms", False), ("txId", True), ("lsn", True), ("xmin", True)]]  # fmt: skip
ROW = {"type": "struct", "fields": _COLUMNS, "optional": True, "name": "bench.public.t.Value"}
SCHEMA = {
    "type": "struct", "optional": False, "name": "bench.public.t.Envelope",
    "fields": [{**ROW, "field": "before"}, {**ROW, "field": "after"},
               {"type": "struct", "fields": _SOURCE, "optional": False, "field": "source"},
               {"type": "string", "optional": False, "field": "op"},
               {"type": "int64", "optional": True, "field": "ts_ms"}],
}  # fmt: skip


def _value(id_: Any, seq: Any, deleted: Any) -> Any:
    """The record value text of event ``seq`` on key ``id_`` (a delete when ``deleted``)."""
    lsn = (seq * 64 + 22_000_000).cast("string")
    balance = F.base64(F.unhex(F.lpad(F.hex(id_ * 100 + seq % 100), 10, "0")))
    row = F.concat(
        F.lit('{"id":'), id_.cast("string"), F.lit(',"name":"customer '), id_.cast("string"),
        F.lit('","balance":"'), balance, F.lit('","created":'),
        (F.lit(1_700_000_000_000_000) + seq * 1_000_003).cast("string"),
        F.lit(',"updated":"2024-05-01T12:00:00.123456Z","active":true,"note":"'),
        F.lit("x" * 60), F.lit('"}'),
    )  # fmt: skip
    source = F.concat(
        F.lit('{"version":"2.7.0.Final","connector":"postgresql","name":"bench","db":"app",'
              '"sequence":"[\\"'), lsn, F.lit('\\",\\"'), lsn,
        F.lit('\\"]","schema":"public","table":"t","ts_ms":1700000000000,"txId":'),
        (seq + 1000).cast("string"), F.lit(',"lsn":'), lsn, F.lit(',"xmin":null}'),
    )  # fmt: skip
    images = F.when(deleted, F.concat(F.lit('"before":'), row, F.lit(',"after":null'))).otherwise(
        F.concat(F.lit('"before":null,"after":'), row)
    )
    op = F.when(deleted, F.lit("d")).otherwise(F.lit("u"))
    return F.concat(
        F.lit('{"schema":' + json.dumps(SCHEMA, separators=(",", ":")) + ',"payload":{'), images,
        F.lit(',"source":'), source, F.lit(',"op":"'), op, F.lit('","ts_ms":1700000000001}}'),
    ).cast("binary")  # fmt: skip


def synthetic_records(spark: SparkSession, events: int, keys: int, partitions: int) -> DataFrame:
    """``events`` change records over ``keys`` keys; every 50th key ends deleted + tombstone."""
    seq = F.col("id")
    id_ = seq % keys
    last_round = seq >= events - keys
    deleted = last_round & (id_ % 50 == 0)
    base = spark.range(0, events, numPartitions=max(2, partitions * 2))
    records = base.select(
        F.lit("bench.public.t").alias("topic"),
        (id_ % partitions).cast("int").alias("partition"),
        seq.alias("offset"),
        F.concat(F.lit('{"id":'), id_.cast("string"), F.lit("}")).cast("binary").alias("key"),
        _value(id_, seq, deleted).alias("value"),
        (F.lit(1_700_000_000_000) + seq).alias("timestamp_ms"),
    )
    tombstones = records.where(deleted).withColumn("value", F.lit(None).cast("binary"))
    return records.unionByName(tombstones.withColumn("offset", F.col("offset") + events))


def best_seconds(frame: DataFrame, runs: int) -> float:
    """Best wall time of ``runs`` full passes over ``frame``."""
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        frame.write.format("noop").mode("overwrite").save()
        best = min(best, time.perf_counter() - start)
    return best


def jvm_cpu_seconds(spark: Any) -> float:
    """CPU time the driver JVM (local mode: all of Spark but the Python workers) has used."""
    pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def report(spark: Any, name: str, frame: DataFrame, records: int, runs: int) -> None:
    """Print the best wall rate of ``runs`` passes and the JVM CPU per record of the last."""
    best_seconds(frame, 1)  # warm-up: code generation, JIT
    cpu = jvm_cpu_seconds(spark)
    wall = best_seconds(frame, runs)
    cpu = (jvm_cpu_seconds(spark) - cpu) / runs
    print(f"  {name:22s} {wall:7.2f} s  {records / wall:10,.0f} records/s  "
          f"({records / cpu:9,.0f} per JVM CPU-second)", flush=True)  # fmt: skip


def local_log_rate(spark: Any, records: int) -> None:
    """Read ``records`` records of 4 partitions back from a local log with the Spark source."""
    with tempfile.TemporaryDirectory() as directory:
        url = f"local://{directory}/log?sync=false"
        log = LocalLog.from_url(url)
        log.ensure_topic("events", 4)
        value = b'{"payload":{"op":"u"}}' + b"x" * 300
        writer = log.writer("bench")
        for start in range(0, records, 50_000):
            writer.begin()
            for i in range(start, min(records, start + 50_000)):
                writer.send("events", f"k{i % 10_000}".encode(), value, partition=i % 4)
            writer.commit()
        ranges = []
        for partition in range(4):
            end = log.bounds("events", partition).end
            ranges.append(PartitionRange(TopicPartition("events", partition), 0, end, 0, end))
        frame = local_log_records(spark, url, ranges)
        seconds = best_seconds(frame, 2)
        print(f"  local log source       {seconds:7.2f} s  {records / seconds:10,.0f} records/s "
              f"({records:,} records of 330 B)")  # fmt: skip
        log.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--python-events", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--local-log-events", type=int, default=500_000)
    args = parser.parse_args()
    spark = spark_session("local[2]", app_name="decode-throughput")
    records = synthetic_records(spark, args.events, args.keys, partitions=4)
    sample = records.where(F.col("value").isNotNull()).first()
    assert sample is not None
    schema = TopicSchema.from_record(bytes(sample["value"]), bytes(sample["key"]))
    total = records.count()
    print(f"{total:,} records ({args.keys:,} keys), local[2]")
    report(spark, "generate only", records, total, args.runs)
    report(spark, "native decode", decode_native(records, schema).good, total, args.runs)
    rebuild = rebuild_table(decoded_latest(latest_records(records), schema), schema)
    rows = rebuild.rows()
    report(spark, "fast-path rebuild", rows, total, args.runs)
    print(f"  ({rows.count():,} rows rebuilt)")
    small = records.where(F.col("offset") < args.python_events)
    python = best_seconds(decode_python(small, schema).good, 1)
    print(f"  python decode          {python:7.2f} s  {args.python_events / python:10,.0f} "
          f"records/s ({args.python_events:,} records; its CPU is in Python workers)")  # fmt: skip
    if args.local_log_events:
        local_log_rate(spark, args.local_log_events)
    spark.stop()


if __name__ == "__main__":
    main()
