"""Throughput of the local log (a script, not a test): run it with the venv's python.

Writes ``--records`` records of ``--value-bytes`` bytes with 16-byte keys (murmur2-partitioned)
in transactions of ``--txn`` records, fsync on, then reads them back via ``read``, ``reader``
and the standalone segment decoder (``SegmentFile.records``), and prints records/s of each.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

from cdc.streams.local import LocalLog, LocalLogSettings
from cdc.streams.protocol import TopicPartition


def main() -> None:
    """Run the benchmark and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--txn", type=int, default=1000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--dir", default=None, help="log directory (default: a temp dir)")
    parser.add_argument("--no-sync", action="store_true", help="skip fsync (CPU cost only)")
    args = parser.parse_args()
    directory = args.dir or tempfile.mkdtemp(prefix="bench-local-log-")
    log = LocalLog(directory, LocalLogSettings(sync=not args.no_sync))
    log.ensure_topic("bench", args.partitions)
    value = os.urandom(args.value_bytes)
    keys = [f"key-{i:012d}".encode() for i in range(args.txn)]

    writer = log.writer("bench")
    started = time.perf_counter()
    written = 0
    while written < args.records:
        writer.begin()
        for key in keys:
            writer.send("bench", key, value)
        writer.commit()
        written += len(keys)
    elapsed = time.perf_counter() - started
    _report(f"write (txn {args.txn}, sync={not args.no_sync})", written, elapsed)

    started = time.perf_counter()
    count = sum(1 for p in range(args.partitions) for _ in log.read("bench", p, 0))
    _report("read()", count, time.perf_counter() - started)

    reader = log.reader({TopicPartition("bench", p): 0 for p in range(args.partitions)})
    started = time.perf_counter()
    count = 0
    while count < written:
        count += len(reader.poll(10_000, timeout_s=0.0))
    _report("reader.poll()", count, time.perf_counter() - started)

    started = time.perf_counter()
    count = 0
    for p in range(args.partitions):
        for seg in log.segment_files("bench", p):
            count += sum(1 for _ in seg.records())
    _report("SegmentFile.records()", count, time.perf_counter() - started)
    log.close()
    print(f"log directory: {directory}")


def _report(what: str, count: int, seconds: float) -> None:
    print(f"{what:28s} {count:>9d} records in {seconds:6.2f}s = {count / seconds:>10,.0f} rec/s")


if __name__ == "__main__":
    main()
