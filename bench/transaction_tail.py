"""What holding whole transactions at the tail costs a rebuild, in one run on one broker.

The changelog of ``bench.replay.changelog`` (the processor's events, 1,000 per transaction)
plus its ``bench.transaction`` metadata topic (BEGIN/END per transaction, the last END left out,
so the last transaction is held). Record timestamps spread over ``--history-s`` seconds before
now: 0 puts the whole topic inside the settle window (the check reads all of it, the worst
case); 3600 puts all but the last minute before it (the check reads the tail only).

    .venv/bin/python -m bench.transaction_tail --events 1000000 --keys 100000
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer

from bench.replay.changelog import COMMIT_EVERY, PROCESSOR, TOPIC, changelog, declared_spec
from bench.replay.changelog import Summary as ChangelogSummary
from cdc.runtime.broker import LocalKafkaBroker
from cdc.streams.registry import open_stream
from replay.sinks.registry import open_sink
from replay.spark import spark_session
from replay.tables.engine import ReplayEngine, ReplayJob

META = f"{PROCESSOR}.transaction"


def produce(bootstrap: str, events: int, keys: int, history_s: float) -> None:
    """The changelog and its metadata, timestamps spread over ``history_s`` before now."""
    stream = open_stream(f"kafka://{bootstrap}")
    stream.ensure_topic(TOPIC, 4, compacted=True)
    stream.ensure_topic(META, 1)
    stream.close()
    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random",
                         "compression.type": "lz4", "linger.ms": 50, "acks": "all",
                         "queue.buffering.max.messages": 2_000_000})  # fmt: skip
    now_ms, span_ms = int(time.time() * 1000), int(history_s * 1000)
    txns = (events + COMMIT_EVERY - 1) // COMMIT_EVERY

    def ts(seq: int) -> int:
        return now_ms - span_ms + span_ms * seq // txns

    def send(topic: str, value: bytes | None, key: bytes | None, at: int) -> None:
        while True:
            try:
                producer.produce(topic, value, key, timestamp=at)
                return
            except BufferError:
                producer.poll(0.05)

    counts: dict[int, int] = {}
    seq = 1
    for key, value in changelog(events, keys, ChangelogSummary()):
        if value is not None:  # a tombstone goes with the delete before it
            seq = int(value.split(b'"commit_seq":', 1)[1].split(b"}", 1)[0])
            counts[seq] = counts.get(seq, 0) + 1
        send(TOPIC, value, key, ts(seq))
    for seq in range(1, txns + 1):
        at, ident = ts(seq), f"{PROCESSOR}:{seq}"
        begin = {"status": "BEGIN", "id": ident, "event_count": None, "data_collections": None}
        send(META, json.dumps(begin).encode(), json.dumps({"id": ident}).encode(), at)
        if seq < txns:  # the last transaction's END has not arrived
            collections = [{"data_collection": TOPIC, "event_count": counts.get(seq, 0)}]
            end = {"status": "END", "id": ident, "event_count": counts.get(seq, 0),
                   "data_collections": collections}  # fmt: skip
            send(META, json.dumps(end).encode(), json.dumps({"id": ident}).encode(), at)
    producer.flush(300)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--trials", type=int, default=2)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="txn-tail-bench-"))
    broker = LocalKafkaBroker(work / "broker", heap="2g")
    bootstrap = broker.start()
    spark = spark_session()
    try:
        for history_s in (0.0, 3600.0):
            produce(bootstrap, args.events, args.keys, history_s)
            stream = open_stream(f"kafka://{bootstrap}")
            for trial in range(args.trials):
                for whole in (False, True):
                    sink_url = f"duckdb://{work}/h{int(history_s)}-t{trial}-{whole}.duckdb"
                    sink = open_sink(sink_url, spark)
                    engine = ReplayEngine(spark, stream, sink)
                    job = ReplayJob((TOPIC,), declared={TOPIC: declared_spec()},
                                    whole_transactions=whole)  # fmt: skip
                    started = time.monotonic()
                    (result,) = engine.run(job)
                    seconds = time.monotonic() - started
                    held = engine.tail.held if engine.tail else 0
                    rows = sink.read(result.table).count()
                    sink.close()
                    print(json.dumps({"history_s": history_s, "trial": trial, "whole": whole,
                                      "seconds": round(seconds, 2), "span": result.span,
                                      "held": held, "rows": rows}), flush=True)  # fmt: skip
            stream.close()
            _delete(bootstrap)
    finally:
        spark.stop()
        broker.stop()


def _delete(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_topics([TOPIC, META]).values():
        future.result()
    time.sleep(3)


if __name__ == "__main__":
    main()
