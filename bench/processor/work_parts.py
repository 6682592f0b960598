"""CPU per event of each step of the work any processor of our changelog must do, no framework.

    .venv/bin/python -m bench.processor.work_parts [--events 200000] [--customers 50000]

Passes over the benchmark's payments (``workload.payment_events``), each doing one more step
than the last, with RocksDB state holding every customer's row (the steady state of the
benchmark). A step's cost is its pass's time less the previous pass's, so it includes what it
does to the caches, as in a real run. No broker, no framework: what is printed is a lower bound
on our processor's time per event in this Python, before consuming, producing and committing.
Compare the total with the time per event of 2x quixstreams in a ``run`` of the same machine.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from decimal import Decimal
from typing import Any

import orjson
from rocksdict import Options, Rdict, WriteBatch

from bench.processor.workload import payment_events
from cdc.connector.changelog import ChangelogConnector, InputOrigin, TransactionCounter
from cdc.events import Op
from cdc.examples import CENTS, PAYMENTS_PER_CUSTOMER

STEPS = (
    "parse the input value (JSON, Decimal amount)",
    "RocksDB get of the customer's row",
    "decode the stored row",
    "the new row, checked and encoded for the store",
    "source and transaction blocks",
    "change-event value (Debezium envelope)",
    "change-event key",
    "RocksDB write batch per 5000 events",
)


def _pass(steps: int, inputs: list[bytes], db: Rdict, schemas: bool) -> float:
    """Seconds to run the first ``steps`` steps over ``inputs``."""
    table = PAYMENTS_PER_CUSTOMER
    connector = ChangelogConnector("bench", [table], partitions=4, schemas_enable=schemas)
    writer = connector._writers[table.name]
    txn = TransactionCounter("bench", 1)
    pending: dict[bytes, bytes] = {}
    sink: list[Any] = [None]  # keeps each step's result alive, as the next step would
    started = time.perf_counter()
    for offset, value in enumerate(inputs):
        payment = orjson.loads(value)
        amount = Decimal(str(payment["amount"])).quantize(CENTS)
        customer = str(payment["customer_id"])
        if steps < 2:
            sink[0] = amount
            continue
        key = table.encode_key(customer)
        stored = pending.get(key)
        if stored is None:
            stored = db[key]  # every customer has a row
            assert stored is not None
        if steps < 3:
            sink[0] = stored
            continue
        before = table.decode_row(stored)
        if steps < 4:
            sink[0] = before
            continue
        row = {
            "customer_id": customer,
            "payments": before["payments"] + 1,
            "total_amount": before["total_amount"] + amount,
        }
        _, data, after = table.check_and_encode(row)
        if steps >= 8:
            pending[key] = data
        if steps < 5:
            sink[0] = data
            continue
        origin = InputOrigin("payments", 0, offset, offset + 1)
        ts = int(time.time() * 1000)
        source = connector.source(table.name, origin, txn, ts, False)
        transaction = txn.next("changelog")
        if steps < 6:
            sink[0] = source, transaction
            continue
        sink[0] = writer.value_of(
            Op.UPDATE, before, after, source, ts_ms=ts, transaction=transaction
        )
        if steps >= 7:
            sink[0] = writer.key(after)
        if steps >= 8 and len(pending) >= 5000:
            batch = WriteBatch(raw_mode=True)  # as our RocksDB store writes
            for k, v in pending.items():
                batch.put(k, v)
            db.write(batch)
            pending.clear()
    return time.perf_counter() - started


def measure(events: int, customers: int, schemas: bool, repeat: int) -> list[float]:
    """Microseconds per event of each step (median over ``repeat`` runs of each pass)."""
    inputs = [value for _, value in payment_events(events, customers, seed=7)]
    db = Rdict(tempfile.mkdtemp(prefix="work-parts-"), options=Options(raw_mode=True))
    for c in range(customers):  # every customer has a row: the benchmark's steady state
        row = {"customer_id": f"c{c}", "payments": 1, "total_amount": Decimal("1.00")}
        key, data, _ = PAYMENTS_PER_CUSTOMER.check_and_encode(row)
        db[key] = data
    totals = [0.0]
    for steps in range(1, len(STEPS) + 1):
        runs = [_pass(steps, inputs, db, schemas) for _ in range(repeat)]
        totals.append(statistics.median(runs) / events * 1e6)
    db.close()
    return [max(0.0, totals[i + 1] - totals[i]) for i in range(len(STEPS))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--customers", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    results = {
        label: measure(args.events, args.customers, schemas, args.repeat)
        for label, schemas in (("schemas on", True), ("schemas off", False))
    }
    print(f"us per event, {args.events:,} payments over {args.customers:,} customers\n")
    print("| step | " + " | ".join(results) + " |")
    print("|---|" + "---:|" * len(results))
    for i, step in enumerate(STEPS):
        print(f"| {step} | " + " | ".join(f"{parts[i]:.2f}" for parts in results.values()) + " |")
    print("| **total** | " + " | ".join(f"**{sum(p):.2f}**" for p in results.values()) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
