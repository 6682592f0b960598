"""CPU per record of a rebuild's compaction task against a plain read of the same partition.

    .venv/bin/python -m bench.replay.compaction_cpu [--records 2000000] [--keys 200000]
        [--stream kafka|local] [--random-keys] [--runs 2]

Writes one partition of the replay benchmark's changelog (``bench.replay.changelog``: key ``(i *
7919) % keys``, ~630 B values; ``--random-keys`` draws the keys at random instead) to a fresh
broker or local log, then alternates, ``--runs`` times each, a plain read of the partition
through the stream's ``read`` (each record dropped) and ``compact_range`` over it (the Spark
task's loop, without Spark), printing the wall time and this process's CPU time per record.
What the compaction adds to the read is what the per-key bookkeeping costs.
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.replay.changelog import TOPIC, Summary, changelog
from cdc.runtime.broker import LocalKafkaBroker
from cdc.streams.protocol import TopicPartition
from cdc.streams.registry import open_stream
from replay.decode.compacted_read import compact_range
from replay.reading.plan import PartitionRange


def _write(url: str, records: int, keys: int, random_keys: bool) -> int:
    """The changelog in one partition of ``url`` (transactions of 50,000); its end offset."""
    stream = open_stream(url)
    stream.ensure_topic(TOPIC, 1, compacted=True)
    writer = stream.writer("bench-compaction-cpu")
    draw = random.Random(7)
    writer.begin()
    for sent, (key, value) in enumerate(changelog(records, keys, Summary()), 1):
        if random_keys:
            key = f'{{"customer_id":"c{draw.randrange(keys):07d}"}}'.encode()
        writer.send(TOPIC, key, value, partition=0)
        if sent % 50_000 == 0:
            writer.commit()
            writer.begin()
    writer.commit()
    writer.close()
    end = stream.bounds(TOPIC, 0).end
    stream.close()
    return end


def main() -> None:
    """Write the partition, then time both loops."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--keys", type=int, default=200_000)
    parser.add_argument("--stream", choices=("kafka", "local"), default="kafka")
    parser.add_argument("--random-keys", action="store_true")
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-compaction-cpu-"))
    broker = LocalKafkaBroker(work / "broker", heap="1g") if args.stream == "kafka" else None
    try:
        url = f"kafka://{broker.start()}" if broker else f"local://{work}/log?sync=false"
        end = _write(url, args.records, args.keys, args.random_keys)
        whole = PartitionRange(TopicPartition(TOPIC, 0), 0, end, 0, end)

        def plain() -> None:
            stream = open_stream(url)
            for _ in stream.read(TOPIC, 0, 0, end):
                pass
            stream.close()

        def compact() -> None:
            for _ in compact_range(url, whole, 1 << 40):
                pass

        loops: list[tuple[str, Callable[[], None]]] = [("read", plain), ("compact", compact)]
        print(f"{end:,} records over {args.keys:,} keys, {args.stream}", flush=True)
        for _ in range(args.runs):
            for name, loop in loops:
                began, cpu = time.monotonic(), time.process_time()
                loop()
                wall, used = time.monotonic() - began, time.process_time() - cpu
                print(f"  {name:8s} wall {wall:6.2f} s  cpu {used:6.2f} s  "
                      f"{1e6 * used / end:5.2f} us per record", flush=True)  # fmt: skip
    finally:
        if broker is not None:
            broker.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
