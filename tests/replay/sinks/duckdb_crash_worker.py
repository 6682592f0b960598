"""Subprocess of the DuckDB crash test: merges a big staged batch into a table, in a loop.

Run as ``python -m tests.replay.sinks.duckdb_crash_worker DB PARQUET``. Merge ``i`` sets ``v = i``
on every key, deletes the keys with ``id % 10 == i % 10`` and records position ``i + 1``, through
the same :class:`DuckDBStore` transaction the sink uses; it prints ``begin i`` / ``commit i``.
The test kills it with SIGKILL at random points and checks the state it finds after reopening.
"""

from __future__ import annotations

import sys

import duckdb

from cdc.streams.protocol import TopicPartition
from replay.sinks.duckdb_store import DuckDBStore
from replay.sinks.protocol import TableSpec

SPEC = TableSpec("big", ("id",))
COLUMNS = [("id", "BIGINT"), ("v", "BIGINT"), ("pad", "VARCHAR")]
TP = TopicPartition("db.big", 0)


def batch_sql(parquet: str, i: int) -> str:
    """Merge ``i``'s change batch over the staged keys."""
    return (
        f"SELECT id, CAST({i} AS BIGINT) AS v, pad,"
        f" CASE WHEN id % 10 = {i % 10} THEN 'd' ELSE 'u' END AS __op,"
        f" lpad('{i}', 10, '0') AS __pos, false AS __truncated FROM read_parquet('{parquet}')"
    )


def main(db: str, parquet: str) -> None:
    """Merge forever (until killed), continuing from the ledger's position."""
    store = DuckDBStore(duckdb.connect(db))
    history = store.history(SPEC.name)
    start = history[-1].positions[TP] if history else 0
    i = start
    while True:
        print(f"begin {i}", flush=True)
        store.merge(SPEC, COLUMNS, batch_sql(parquet, i), {TP: i + 1}, schema="{}")
        print(f"commit {i}", flush=True)
        i += 1


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
