"""Read a DuckDB read model while ``replicator replay --follow`` (or ``project --follow``) keeps
it live, from any process, with nothing but the ``duckdb`` package.

The writer holds the database file only while it applies one batch (DuckDB allows one writing
process or many reading ones, never both), so: open the file read-only for each read, retry
while the writer's lock is taken, and close it right after. Everything read through one
connection is one committed state: the table and the ledger row saying which offsets it reflects.

    python docs/examples/live_duckdb_reader.py out.duckdb payments_per_customer --every 1

prints one JSON line per read: the time, how long the lock kept it waiting, the table's
positions (next offset per topic-partition) and its row count (``--rows``: the rows).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

import duckdb


def connect_read_only(path: str, timeout_s: float = 30.0) -> tuple[Any, float]:
    """A read-only connection and the seconds spent waiting for the writer's lock."""
    started = time.monotonic()
    delay = 0.002
    while True:
        try:
            return duckdb.connect(path, read_only=True), time.monotonic() - started
        except duckdb.IOException as exc:
            if "lock" not in str(exc).lower() or time.monotonic() - started > timeout_s:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.05)


def read_table(path: str, table: str) -> dict[str, Any]:
    """One consistent read of ``table`` (a replayed table or a projection's view): the
    positions it reflects and its rows (without the sink's ``__`` bookkeeping columns)."""
    conn, waited = connect_read_only(path)
    try:
        stored = _stored_table(conn, table)
        positions = conn.execute(
            'SELECT topic, "partition", next_offset FROM _replicator_ledger WHERE table_name = ?'
            " AND version = (SELECT max(version) FROM _replicator_ledger WHERE table_name = ?)",
            [stored, stored],
        ).fetchall()
        cursor = conn.execute(f'SELECT * FROM "{table}" ORDER BY ALL')
        keep = [i for i, d in enumerate(cursor.description) if not d[0].startswith("__")]
        rows = [[row[i] for i in keep] for row in cursor.fetchall()]
    except duckdb.CatalogException:  # the follower has not written the table yet
        positions, rows = [], []
    finally:
        conn.close()
    return {
        "t": time.time(),
        "waited": waited,
        "positions": {f"{t}:{p}": n for t, p, n in positions if t is not None},
        "rows": rows,
    }


def _stored_table(conn: Any, table: str) -> str:
    """The table whose ledger says what ``table`` reflects: itself, or for a projection's view
    the stored table of the version it serves."""
    try:
        found = conn.execute(
            "SELECT state FROM _replicator_projections WHERE name = ?", [table]
        ).fetchone()
    except duckdb.CatalogException:  # no projection in this file
        return table
    if found is None:
        return table
    state = json.loads(found[0])
    served = [v for v in state["versions"] if v["number"] == state["active"]]
    return str(served[0]["tables"][0]) if served else table  # none served yet: no ledger rows


def main() -> None:
    """Read the table every ``--every`` seconds until Ctrl-C or until ``--stop-file`` exists."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("database")
    p.add_argument("table")
    p.add_argument("--every", type=float, default=1.0, help="seconds between reads")
    p.add_argument("--rows", action="store_true", help="print the rows, not just their count")
    p.add_argument("--stop-file", help="stop once this file exists")
    args = p.parse_args()
    try:
        while not (args.stop_file and os.path.exists(args.stop_file)):
            if os.path.exists(args.database):  # created by the follower's first write
                read = read_table(args.database, args.table)
                if not args.rows:
                    read["rows"] = len(read["rows"])
                print(json.dumps(read, default=str), flush=True)
            time.sleep(args.every)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
