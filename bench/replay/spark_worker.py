"""One Spark contender in its own process: ``python -m bench.replay.spark_worker SPEC RESULT``.

Contenders (``spec["contender"]``):

- ``spark-read``: Spark's Kafka source reading every record of the plan (key and value into a
  ``noop`` write): the read rate our Spark pipeline can at best reach.
- ``local-raw``: one Python process reading every record of the topic's copy in the embedded
  local log through the stream protocol (batched ``poll`` of one reader, values touched, nothing
  decoded): the local log's counterpart of ``raw-consume``. No SparkSession.
- ``local-read``: Spark reading the same copy with the local log's Spark source (the executors
  parse the segment files) into a ``noop`` write: the counterpart of ``spark-read``.
- ``ours-duckdb`` / ``ours-delta``: ``ReplayEngine.run`` of a full rebuild (the fast path) into a
  fresh DuckDB file / Delta directory.
- ``ours-local-duckdb``: the same rebuild into DuckDB from the embedded local log: the topic is
  first copied, record by record with its partition and timestamp, into a local log in the work
  directory (not measured; the ``local-*`` contenders of the run share the copy).
- ``spark-merge``: the common recipe, a Structured Streaming query on the Kafka source,
  ``trigger(availableNow=True)``, ``foreachBatch`` parsing the batch, keeping the newest record
  per key, and one Delta ``MERGE`` (delete / update / insert) per micro-batch.

``seconds`` is the measured phase only (the SparkSession is already up); the table check runs
after it. The result JSON holds ``records`` (offsets read), ``seconds`` and ``table``
(rows, sum of payments, sum of total_amount in cents).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from bench.replay.changelog import TOPIC, declared_spec
from cdc.streams.protocol import EventStream
from cdc.streams.registry import open_stream
from replay.driver_jit import ONE_SHOT_MAX_RECORDS
from replay.reading.bounds import Bound, BoundKind
from replay.reading.plan import ReplayPlan, plan_replay, stored_records
from replay.reading.sources import read_records
from replay.spark import Column, DataFrame, F, SparkSession, spark_session
from replay.tables.engine import ReplayEngine, ReplayJob


def table_check(frame: DataFrame) -> dict[str, int]:
    """What ``run.checked`` compares with the generator's summary: rows, payments, cents."""
    row = frame.agg(
        F.count(F.lit(1)), F.sum("payments"), F.sum(F.col("total_amount") * 100)
    ).first()
    assert row is not None
    return {"rows": int(row[0]), "payments": int(row[1] or 0), "cents": int(row[2] or 0)}


def spark_read(spark: SparkSession, spec: dict[str, Any]) -> dict[str, Any]:
    stream = open_stream(f"kafka://{spec['bootstrap']}")
    plan = plan_replay(stream, [TOPIC], Bound(BoundKind.EARLIEST), Bound(BoundKind.LATEST))
    started = time.monotonic()
    records = read_records(spark, stream.url, plan)
    records.select("key", "value").write.format("noop").mode("overwrite").save()
    return {"seconds": time.monotonic() - started}


def local_copy(spec: dict[str, Any]) -> str:
    """The topic copied into a local log under the work directory (once per run); its URL."""
    url = f"local://{spec['work']}/local-log"
    done = Path(spec["work"]) / "local-log.copied"
    if done.exists():
        return url
    source = open_stream(f"kafka://{spec['bootstrap']}")
    copy = open_stream(url)
    partitions = source.partition_count(TOPIC)
    copy.ensure_topic(TOPIC, partitions, compacted=True)
    for partition in range(partitions):
        writer = copy.writer(f"bench-copy-{partition}")
        writer.begin()
        start = source.bounds(TOPIC, partition).log_start
        for sent, r in enumerate(source.read(TOPIC, partition, start), 1):
            writer.send(TOPIC, r.key, r.value, partition=partition, timestamp_ms=r.timestamp_ms)
            if sent % 100_000 == 0:
                writer.commit()
                writer.begin()
        writer.commit()
        writer.close()
    source.close()
    copy.close()
    done.touch()
    return url


def _full_plan(url: str) -> tuple[EventStream, ReplayPlan]:
    stream = open_stream(url)
    return stream, plan_replay(stream, [TOPIC], Bound(BoundKind.EARLIEST), Bound(BoundKind.LATEST))


def local_raw(spec: dict[str, Any]) -> dict[str, Any]:
    """Batched polls of one reader, as ``raw-consume`` reads Kafka."""
    stream, plan = _full_plan(local_copy(spec))
    stops = {r.tp: r.stop for r in plan.ranges}
    reader = stream.reader({r.tp: r.start for r in plan.ranges})
    started = time.monotonic()
    seen = size = 0
    while any(reader.position(tp.topic, tp.partition) < stop for tp, stop in stops.items()):
        for record in reader.poll(10_000, 1.0):
            value = record.value
            size += len(value) if value is not None else 0
            seen += 1
    seconds = time.monotonic() - started
    reader.close()
    stream.close()
    return {"seconds": seconds, "records": seen, "value_bytes": size}


def local_read(spark: SparkSession, spec: dict[str, Any]) -> dict[str, Any]:
    url = local_copy(spec)
    stream, plan = _full_plan(url)
    started = time.monotonic()
    records = read_records(spark, url, plan)
    records.select("key", "value").write.format("noop").mode("overwrite").save()
    seconds = time.monotonic() - started
    stream.close()
    return {"seconds": seconds}


def ours(
    spark: SparkSession, spec: dict[str, Any], sink_kind: str, stream_url: str | None = None
) -> dict[str, Any]:
    """The rebuild in the fresh process (``seconds``: JIT and Python workers warming up
    included); with ``spec["warm"]`` again into a new target in the same session
    (``warm_seconds``, ``warm_table``)."""
    stream = open_stream(stream_url or f"kafka://{spec['bootstrap']}")
    out: dict[str, Any] = {}
    for run in ("", "warm_") if spec.get("warm") else ("",):
        name = f"{spec['contender']}{spec.get('tag', '')}-{run}target.{sink_kind}"
        target = Path(spec["work"]) / name
        if sink_kind == "duckdb":
            from replay.sinks.duckdb_sink import DuckDBSink

            sink: Any = DuckDBSink(target, spark)
        else:
            from replay.sinks.delta_sink import DeltaSink

            sink = DeltaSink(target, spark)
        engine = ReplayEngine(spark, stream, sink)
        job = ReplayJob((TOPIC,), declared={TOPIC: declared_spec()})
        started = time.monotonic()
        (result,) = engine.run(job)
        out[f"{run}seconds"] = time.monotonic() - started
        assert result.mode == "rebuild", result
        out[f"{run}table"] = table_check(sink.read(result.table))
        sink.close()
    return {**out, "mode": "rebuild"}


def spark_merge(spark: SparkSession, spec: dict[str, Any]) -> dict[str, Any]:
    from delta.tables import DeltaTable

    work = Path(spec["work"])
    path, checkpoint = str(work / "merge.delta"), str(work / "merge.checkpoint")
    columns = "customer_id STRING, payments BIGINT, total_amount DECIMAL(38,2)"
    spark.createDataFrame([], columns).write.format("delta").save(path)
    image = "customer_id STRING, payments BIGINT, total_amount STRING"
    value_type = f"op STRING, before STRUCT<{image}>, after STRUCT<{image}>"

    def upsert(batch: DataFrame, batch_id: int) -> None:
        v = F.from_json(F.col("value").cast("string"), value_type)
        key = F.from_json(F.col("key").cast("string"), "customer_id STRING")["customer_id"]
        parsed = batch.select(
            key.alias("customer_id"), "partition", "offset", v.alias("v"),
            (F.col("value").isNull() | (v["op"] == "d")).alias("deleted"),
        )  # fmt: skip
        newest = F.max_by(F.struct("v", "deleted"), F.struct("partition", "offset"))
        latest = parsed.groupBy("customer_id").agg(newest.alias("n"))
        cents = F.conv(F.hex(F.unbase64(F.col("n.v.after.total_amount"))), 16, 10)
        source = latest.select(
            "customer_id", F.col("n.deleted").alias("deleted"),
            F.col("n.v.after.payments").alias("payments"),
            (cents.cast("decimal(38,0)") / 100).cast("decimal(38,2)").alias("total_amount"),
        )  # fmt: skip
        values: dict[str, str | Column] = {
            c: f"s.{c}" for c in ("customer_id", "payments", "total_amount")
        }
        (
            DeltaTable.forPath(spark, path).alias("t")
            .merge(source.alias("s"), "t.customer_id = s.customer_id")
            .whenMatchedDelete("s.deleted")
            .whenMatchedUpdate(set=values)
            .whenNotMatchedInsert("NOT s.deleted", values)
            .execute()
        )  # fmt: skip

    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", spec["bootstrap"])
        .option("subscribe", TOPIC)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(spec["merge_batch"]))
        .option("failOnDataLoss", "false")
        .load()
    )
    started = time.monotonic()
    query = (
        reader.writeStream.foreachBatch(upsert)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    seconds = time.monotonic() - started
    batches = len(query.recentProgress)
    table = table_check(spark.read.format("delta").load(path))
    return {"seconds": seconds, "table": table, "batches": batches}


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    if spec["contender"] == "local-raw":
        Path(sys.argv[2]).write_text(json.dumps(local_raw(spec)))
        return
    contender = spec["contender"]
    one_shot = None
    if spec.get("one_shot"):  # as `replicator replay` chooses its JIT (replay/cli/replay.py)
        url = (
            local_copy(spec) if contender == "ours-local-duckdb" else f"kafka://{spec['bootstrap']}"
        )
        stream = open_stream(url)
        try:
            one_shot = stored_records(stream, [TOPIC], limit=ONE_SHOT_MAX_RECORDS)
        finally:
            stream.close()
    began = time.monotonic()
    spark = spark_session(
        spec.get("master"), app_name=f"bench-{contender}", one_shot_records=one_shot
    )
    session_s = time.monotonic() - began
    if contender == "spark-read":
        result = spark_read(spark, spec)
    elif contender == "local-read":
        result = local_read(spark, spec)
    elif contender == "ours-local-duckdb":
        result = ours(spark, spec, "duckdb", local_copy(spec))
    elif contender.startswith("ours-"):
        result = ours(spark, spec, contender.removeprefix("ours-"))
    elif contender == "spark-merge":
        result = spark_merge(spark, spec)
    else:
        raise SystemExit(f"unknown contender {contender}")
    result["session_s"] = session_s
    result["one_shot_records"] = one_shot
    Path(sys.argv[2]).write_text(json.dumps(result))
    spark.stop()


if __name__ == "__main__":
    main()
