"""One confluent-kafka contender in its own process: ``python -m bench.replay.kafka_worker SPEC
RESULT``.

- ``raw-consume``: a confluent-kafka consumer reading every record of the topic (batched
  ``consume``, values touched, nothing decoded): the topic's consume rate, the limit.
- ``naive-duckdb``: what a user writes by hand: consume, ``json.loads`` each value, one DuckDB
  ``INSERT OR REPLACE`` or ``DELETE`` per record, a DuckDB commit every 10,000 records. It runs
  on the first ``naive_records`` records only (it is slow); its rate is measured on that prefix.
"""

from __future__ import annotations

import base64
import json
import sys
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
from confluent_kafka import Consumer, TopicPartition

from bench.replay.changelog import TOPIC


def _consumer(spec: dict[str, Any], name: str) -> tuple[Consumer, int]:
    """A consumer assigned to every partition from the start, and the records to read."""
    consumer = Consumer(
        {
            "bootstrap.servers": spec["bootstrap"],
            "group.id": f"bench-{name}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "fetch.max.bytes": 64 * 1024 * 1024,
            "max.partition.fetch.bytes": 16 * 1024 * 1024,
        }
    )
    partitions = consumer.list_topics(TOPIC, timeout=30).topics[TOPIC].partitions
    total = 0
    for p in partitions:
        low, high = consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30)
        total += high - low
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in partitions])
    return consumer, total


def raw_consume(spec: dict[str, Any]) -> dict[str, Any]:
    consumer, total = _consumer(spec, "raw")
    began = time.monotonic()
    first = consumer.consume(1, 30.0)  # the clock starts at the first record (fetch started)
    started = time.monotonic()
    seen, size = len(first), sum(len(m.value() or b"") for m in first)
    while seen < total:
        for message in consumer.consume(10_000, 1.0):
            value = message.value()
            size += len(value) if value is not None else 0
            seen += 1
    seconds = time.monotonic() - started
    consumer.close()
    return {"seconds": seconds, "records": seen, "value_bytes": size, "first_s": started - began}


def naive_duckdb(spec: dict[str, Any]) -> dict[str, Any]:
    consumer, total = _consumer(spec, "naive")
    limit = min(total, spec["naive_records"])
    db = duckdb.connect(str(Path(spec["work"]) / "naive.duckdb"))
    db.execute(
        "CREATE TABLE payments_per_customer (customer_id VARCHAR PRIMARY KEY, payments BIGINT,"
        " total_amount DECIMAL(38, 2))"
    )
    started = time.monotonic()
    seen = 0
    db.execute("BEGIN")
    while seen < limit:
        for message in consumer.consume(500, 1.0):
            if seen == limit:
                break
            key = json.loads(message.key() or b"null")["customer_id"]
            raw = message.value()
            event = json.loads(raw) if raw is not None else None
            if event is None or event["op"] == "d":
                db.execute("DELETE FROM payments_per_customer WHERE customer_id = ?", [key])
            else:
                row = event["after"]
                cents = int.from_bytes(base64.b64decode(row["total_amount"]), "big", signed=True)
                db.execute(
                    "INSERT OR REPLACE INTO payments_per_customer VALUES (?, ?, ?)",
                    [key, row["payments"], Decimal(cents).scaleb(-2)],
                )
            seen += 1
            if seen % 10_000 == 0:
                db.execute("COMMIT")
                db.execute("BEGIN")
    db.execute("COMMIT")
    seconds = time.monotonic() - started
    consumer.close()
    rows, payments, cents = db.execute(
        "SELECT count(*), sum(payments), sum(total_amount * 100) FROM payments_per_customer"
    ).fetchone() or (0, 0, 0)
    db.close()
    table = {"rows": int(rows), "payments": int(payments or 0), "cents": int(cents or 0)}
    return {"seconds": seconds, "records": seen, "subset": seen < total, "table": table}


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    contender = spec["contender"]
    if contender == "raw-consume":
        result = raw_consume(spec)
    elif contender == "naive-duckdb":
        result = naive_duckdb(spec)
    else:
        raise SystemExit(f"unknown contender {contender}")
    Path(sys.argv[2]).write_text(json.dumps(result))


if __name__ == "__main__":
    main()
