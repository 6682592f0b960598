"""Benchmark of candidate persistent state-store engines for the processor's access pattern.

Per engine, in a fresh process (so peak RSS is its own): ``load`` inserts N keys (8-byte keys in
random order, 100-byte values): a point get (a miss) then a put per key, 1000 writes per atomic
apply with a checkpoint, each apply durable (fsync); ``update`` does the same for N random
existing keys (hits); ``scan`` reads every row in key order; ``restart`` closes the engine,
reopens it (a processor restarted over its state, larger than RocksDB's 64 MB block cache at
1 M keys) and times point gets of random existing keys, the first lookups of a restarted
processor. Engines: RocksDB (the real
``rocksdb://`` store of ``cdc.state``, also with ``?sync=false``), SQLite (WAL,
synchronous=FULL, 64 MiB page cache) and DuckDB. RSS "open" is after the engine opened;
"growth" is what the workload added on top (keys are computed, not held in lists).

    .venv/bin/python bench/state_store_bench.py --n 1000000 [--engines rocksdb sqlite duckdb]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any, Protocol

from cdc.state.stores import open_state_store
from cdc.streams.protocol import TopicPartition

TABLE = "bench"
CHANGELOG = TopicPartition("changelog", 0)
_PRIME = 2**61 - 1
RESTART_GETS = 200_000


class Engine(Protocol):
    def get(self, key: bytes) -> bytes | None: ...
    def apply(self, writes: dict[bytes, bytes], position: int) -> None: ...
    def scan(self) -> Iterator[tuple[bytes, bytes]]: ...
    def close(self) -> None: ...


class RocksEngine:
    def __init__(self, directory: str, sync: bool = True) -> None:
        self.store = open_state_store(f"rocksdb://{directory}/rocks?sync={str(sync).lower()}")

    def get(self, key: bytes) -> bytes | None:
        return self.store.get(TABLE, key)

    def apply(self, writes: dict[bytes, bytes], position: int) -> None:
        self.store.apply({TABLE: writes}, {CHANGELOG: position})

    def scan(self) -> Iterator[tuple[bytes, bytes]]:
        return self.store.scan(TABLE)

    def close(self) -> None:
        self.store.close()


class SqlEngine:
    """SQLite or DuckDB: one (table, key) -> value table and a checkpoint table."""

    def __init__(self, kind: str, directory: str) -> None:
        if kind == "sqlite":
            import sqlite3

            self.db: Any = sqlite3.connect(f"{directory}/state.sqlite", isolation_level=None)
            for pragma in ("journal_mode=WAL", "synchronous=FULL", "cache_size=-65536"):
                self.db.execute(f"PRAGMA {pragma}")
            rowid = " WITHOUT ROWID"
        else:
            import duckdb

            self.db = duckdb.connect(f"{directory}/state.duckdb")
            rowid = ""
        create = "CREATE TABLE IF NOT EXISTS"  # the restart phase opens the same files again
        self.db.execute(f"{create} kv (t TEXT, k BLOB, v BLOB, PRIMARY KEY (t, k)){rowid}")
        self.db.execute(
            f"{create} cp (topic TEXT, part INT, pos BIGINT, PRIMARY KEY (topic, part))"
        )
        self.kind = kind

    def get(self, key: bytes) -> bytes | None:
        row = self.db.execute("SELECT v FROM kv WHERE t = ? AND k = ?", (TABLE, key)).fetchone()
        return None if row is None else bytes(row[0])

    def apply(self, writes: dict[bytes, bytes], position: int) -> None:
        self.db.execute("BEGIN")
        rows = [(TABLE, k, v) for k, v in writes.items()]
        if self.kind == "sqlite":
            self.db.executemany("INSERT OR REPLACE INTO kv VALUES (?, ?, ?)", rows)
        else:  # DuckDB's executemany runs one statement per row: one multi-row statement instead
            values = ", ".join(["(?, ?, ?)"] * len(rows))
            self.db.execute(
                f"INSERT OR REPLACE INTO kv VALUES {values}", [x for r in rows for x in r]
            )
        self.db.execute("INSERT OR REPLACE INTO cp VALUES (?, ?, ?)", (*CHANGELOG, position))
        self.db.execute("COMMIT")

    def scan(self) -> Iterator[tuple[bytes, bytes]]:
        cursor = self.db.execute("SELECT k, v FROM kv WHERE t = ? ORDER BY k", (TABLE,))
        while batch := cursor.fetchmany(10_000):
            yield from batch

    def close(self) -> None:
        self.db.close()


def _engine(name: str, directory: str) -> Engine:
    if name == "rocksdb":
        return RocksEngine(directory)
    if name == "rocksdb-nosync":
        return RocksEngine(directory, sync=False)
    return SqlEngine(name, directory)


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _key(i: int) -> bytes:
    """Key ``i`` of a pseudo-random permutation: keys arrive in random order, no list held."""
    return (i * 0x9E3779B97F4A7C15 % _PRIME).to_bytes(8, "big")


def _pass(engine: Engine, indexes: Iterator[int], n: int, batch: int, start: int) -> float:
    rng = random.Random(start)
    began = time.perf_counter()
    for b in range(n // batch):
        writes: dict[bytes, bytes] = {}
        for _ in range(batch):
            key = _key(next(indexes))
            engine.get(key)
            writes[key] = rng.randbytes(100)
        engine.apply(writes, start + b + 1)
    return n / (time.perf_counter() - began)


def _gets(engine: Engine, rng: random.Random, n: int, count: int) -> float:
    """Point gets of ``count`` random existing keys, per second (each must hit)."""
    began = time.perf_counter()
    for _ in range(count):
        assert engine.get(_key(rng.randrange(n))) is not None
    return count / (time.perf_counter() - began)


def run_child(name: str, n: int, batch: int) -> dict[str, Any]:
    """Run the workload on one engine in this process (``n`` a multiple of ``batch``)."""
    rng = random.Random(42)
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as directory:
        engine = _engine(name, directory)
        result: dict[str, Any] = {"engine": name, "n": n, "rss_start_mb": _rss_mb()}
        result["load_ops_s"] = _pass(engine, iter(range(n)), n, batch, 0)
        updates = (rng.randrange(n) for _ in range(n))
        result["update_ops_s"] = _pass(engine, updates, n, batch, n)
        began = time.perf_counter()
        rows = sum(1 for _ in engine.scan())
        result["scan_rows_s"] = rows / (time.perf_counter() - began)
        assert rows == n, (rows, n)
        engine.close()
        began = time.perf_counter()
        engine = _engine(name, directory)
        result["reopen_s"] = time.perf_counter() - began
        result["restart_get_s"] = _gets(engine, rng, n, min(n, RESTART_GETS))
        engine.close()
        result["disk_mb"] = (
            sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(directory) for f in fs)
            / 2**20
        )
    result["peak_rss_mb"] = _rss_mb()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--engines", nargs="+", default=["rocksdb", "sqlite", "duckdb"])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_child(args.child, args.n, args.batch)))
        return
    print(
        f"{'engine':15} {'n':>9} {'load op/s':>10} {'update op/s':>11} {'scan row/s':>11}"
        f" {'restart get/s':>13} {'reopen s':>8} {'RSS MB: peak':>12} {'open':>5}"
        f" {'growth':>6} {'disk MB':>8}"
    )
    for name in args.engines:
        cmd = [
            sys.executable,
            __file__,
            "--child",
            name,
            "--n",
            str(args.n),
            "--batch",
            str(args.batch),
        ]
        r = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
        print(
            f"{name:15} {r['n']:>9} {r['load_ops_s']:>10.0f} {r['update_ops_s']:>11.0f}"
            f" {r['scan_rows_s']:>11.0f} {r['restart_get_s']:>13.0f} {r['reopen_s']:>8.2f}"
            f" {r['peak_rss_mb']:>12.0f} {r['rss_start_mb']:>5.0f}"
            f" {r['peak_rss_mb'] - r['rss_start_mb']:>6.0f} {r['disk_mb']:>8.0f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
