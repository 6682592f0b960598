"""CPU per event of our processor's Python path alone: no broker, the benchmark's input and job.

    .venv/bin/python -m bench.processor.python_path [--events 100000] [--schemaless] [--profile]

Feeds the benchmark's payments to ``EventProcessor._process`` (decode, ``count_payment`` on a
RocksDB store, capture, change-event encoding) and commits every 5000 events to the store, with
a writer that drops the records instead of producing them. What is left of the benchmark's time
per event is the Kafka client (consume, produce, transactions) and the broker. ``--profile``
prints the top cProfile entries. Run it from a tree to measure that tree (``cwd`` shadows
``cdc``), e.g. a ``--baseline-tree`` copy.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import tempfile
import time
from collections.abc import Mapping

from bench.processor.workload import payment_events
from cdc.examples import PAYMENTS_PER_CUSTOMER, count_payment
from cdc.processor import EventProcessor, ProcessorConfig
from cdc.state import StateTables, open_state_store
from cdc.streams.protocol import StreamRecord, TopicPartition


class _DroppingWriter:
    def __init__(self) -> None:
        self.sent = 0

    def begin(self) -> None:
        pass

    def send(self, topic: str, key: bytes | None, value: bytes | None, **_: object) -> None:
        self.sent += 1

    def commit(self, consumed: Mapping[TopicPartition, int] | None = None, reader: object = None
               ) -> dict[TopicPartition, int]:  # fmt: skip
        return {TopicPartition("bench.payments_per_customer", 0): self.sent}


class _Stream:
    def partition_count(self, topic: str) -> int:
        return 4


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--customers", type=int, default=50_000)
    parser.add_argument("--schemaless", action="store_true")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    records = [
        StreamRecord("payments-in", i % 4, i, key, value, 0)
        for i, (key, value) in enumerate(payment_events(args.events, args.customers, 7))
    ]
    url = f"rocksdb://{tempfile.mkdtemp(prefix='bench-python-path-')}/store"
    config = ProcessorConfig("bench", ("payments-in",), store_url=url,
                             schemas_enable=not args.schemaless)  # fmt: skip
    processor = EventProcessor(config, _Stream(), [PAYMENTS_PER_CUSTOMER], count_payment)  # type: ignore[arg-type]
    processor._writer = _DroppingWriter()  # type: ignore[assignment]
    processor.tables = StateTables(open_state_store(url), [PAYMENTS_PER_CUSTOMER])

    def run() -> None:
        for start in range(0, len(records), 5000):
            for record in records[start : start + 5000]:
                processor._process(record)
            processor._commit()

    began = time.process_time()
    profiler = cProfile.Profile() if args.profile else None
    if profiler is not None:
        profiler.runcall(run)
    else:
        run()
    cpu = time.process_time() - began
    print(f"{args.events / cpu:,.0f} events per CPU-second ({cpu / args.events * 1e6:.1f} us/event)"
          + (" under cProfile" if profiler else ""))  # fmt: skip
    if profiler is not None:
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
