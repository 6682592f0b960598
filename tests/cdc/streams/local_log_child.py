"""A writer process for the crash tests: commits numbered transactions until it is killed.

``python local_log_child.py DIR SEGMENT_BYTES PER_TXN SYNC`` continues after the last
transaction committed in DIR (the position of group ``g`` on ``src``/0) and prints each
transaction's number once it is committed. Transaction ``n`` writes ``PER_TXN`` records
``n:p:i`` to each partition ``p`` of ``out`` and one record ``n`` to ``side``.
"""

from __future__ import annotations

import sys

from cdc.streams.local import LocalLog, LocalLogSettings
from cdc.streams.protocol import TopicPartition

OUT_PARTITIONS = 3


def main() -> None:
    """Write transactions forever."""
    directory, segment_bytes, per_txn, sync = sys.argv[1:5]
    settings = LocalLogSettings(
        segment_bytes=int(segment_bytes), index_interval_bytes=256, sync=sync == "1"
    )
    log = LocalLog(directory, settings)
    log.ensure_topic("out", OUT_PARTITIONS)
    log.ensure_topic("side", 1)
    reader = log.reader({}, group="g")
    writer = log.writer("child")
    n = log.committed_positions("g", "src").get(0, 0)
    print("ready", n, flush=True)
    while True:
        writer.begin()
        for i in range(int(per_txn)):
            for p in range(OUT_PARTITIONS):
                writer.send("out", f"k{i}".encode(), f"{n}:{p}:{i}".encode() * 3, partition=p)
        writer.send("side", None, str(n).encode(), partition=0)
        writer.commit({TopicPartition("src", 0): n + 1}, reader)
        print(n, flush=True)
        n += 1


if __name__ == "__main__":
    main()
