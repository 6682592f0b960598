"""What decoding every record by its own schema costs a rebuild, in one run on one broker.

The changelog of ``bench.replay.changelog`` three times: schemaless (decoded by the declared
table: no version scan), with its Connect schema in every record (one version: the scan finds
it, the decode is the usual one), and with a second schema for the second half of the events
(an added optional column: the decode runs per version and aligns). Each is rebuilt into DuckDB
``--trials`` times; the version scan is also timed alone.

    .venv/bin/python -m bench.schema_versions --events 1000000 --keys 100000
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from functools import partial
from pathlib import Path

from confluent_kafka import Producer

from bench.replay.changelog import TOPIC, Summary, changelog, declared_spec
from cdc.events.columns import Column, ColumnKind
from cdc.events.writer import EventWriter
from cdc.runtime.broker import LocalKafkaBroker
from cdc.streams.registry import open_stream
from replay.decode.schema_versions import find_versions
from replay.reading.bounds import Bound, BoundKind
from replay.reading.plan import plan_replay
from replay.reading.sources import read_records
from replay.sinks.registry import open_sink
from replay.spark import spark_session
from replay.tables.engine import ReplayEngine, ReplayJob


def produce(bootstrap: str, topic: str, events: int, keys: int, layout: str) -> Summary:
    """The changelog into ``topic``: ``bare``, ``one`` schema, or ``two`` (second half)."""
    spec = declared_spec()
    note = Column(name="note", type=ColumnKind.STRING)
    wider = spec.model_copy(update={"columns": (*spec.columns, note)})
    heads = [EventWriter(spec).value_head, EventWriter(wider).value_head]
    stream = open_stream(f"kafka://{bootstrap}")
    stream.ensure_topic(topic, 4, compacted=True)
    stream.close()
    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random",
                         "compression.type": "lz4", "linger.ms": 50,
                         "queue.buffering.max.messages": 2_000_000})  # fmt: skip
    summary = Summary()
    for i, (key, value) in enumerate(changelog(events, keys, summary)):
        if value is not None and layout != "bare":
            head = heads[1 if layout == "two" and i >= events // 2 else 0]
            value = b"".join((head, value, b"}"))
        while True:
            try:
                producer.produce(topic, value, key)
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(300)
    return summary


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--trials", type=int, default=2)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="schema-versions-bench-"))
    broker = LocalKafkaBroker(work / "broker", heap="2g")
    bootstrap = broker.start()
    spark = spark_session()
    try:
        for layout in ("bare", "one", "two"):
            topic = f"{TOPIC}.{layout}"
            summary = produce(bootstrap, topic, args.events, args.keys, layout)
            stream = open_stream(f"kafka://{bootstrap}")
            declared = {topic: declared_spec()} if layout == "bare" else {}
            for trial in range(args.trials):
                sink = open_sink(f"duckdb://{work}/{layout}-{trial}.duckdb", spark)
                started = time.monotonic()
                job = ReplayJob((topic,), declared=declared)
                (result,) = ReplayEngine(spark, stream, sink).run(job)
                seconds = time.monotonic() - started
                rows = sink.read(result.table).count()
                sink.close()
                plan = plan_replay(stream, [topic], Bound(BoundKind.EARLIEST),
                                   Bound(BoundKind.LATEST), {})  # fmt: skip
                scan_started = time.monotonic()
                base = ReplayEngine(spark, stream, sink)._schema(topic, declared.get(topic))
                versions = find_versions(partial(read_records, spark, stream.url, plan), base)
                scan = time.monotonic() - scan_started
                print(json.dumps({"layout": layout, "trial": trial, "seconds": round(seconds, 2),
                                  "scan_s": round(scan, 2), "versions": len(versions),
                                  "rows": rows, "expected_rows": summary.rows,
                                  "span": result.span}), flush=True)  # fmt: skip
            stream.close()
    finally:
        spark.stop()
        broker.stop()


if __name__ == "__main__":
    main()
