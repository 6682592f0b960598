"""``replicator query``: read a DuckDB read model, also while another process keeps it live.

The query runs on a read-only connection opened for it alone (retried while the writer holds the
file for a batch, see :mod:`replay.sinks.duckdb_files`), so it never blocks the writer for longer
than the query itself and sees one committed state: tables and ledger agree.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from typing import Any

from rich.console import Console
from rich.table import Table

from cdc.errors import UsageError


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("sink", help="duckdb:///path.duckdb")
    p.add_argument("sql", help='one SQL query, e.g. "SELECT * FROM payments_per_customer"')
    p.add_argument("--format", choices=("table", "csv", "json"), default="table")
    p.add_argument("--timeout", type=float, default=30.0,
                   help="seconds to wait while the writer holds the file (default 30)")  # fmt: skip


def run(args: argparse.Namespace) -> int:
    """Print the query's result; 2 (one line) for a missing file, bad SQL or a busy writer."""
    from replay.sinks import duckdb_files
    from replay.sinks.registry import sink_path

    scheme, path = sink_path(args.sink)
    if scheme != "duckdb":
        raise UsageError(f"{args.sink}: query reads DuckDB files; read Delta tables with Spark")
    try:
        names, rows = duckdb_files.query(path, args.sql, timeout_s=args.timeout)
    except duckdb_files.QUERY_ERRORS as exc:
        raise UsageError(f"query on {path}: {exc}") from exc
    _print(args.format, names, rows)
    return 0


def _print(fmt: str, names: list[str], rows: list[tuple[Any, ...]]) -> None:
    if fmt == "csv":
        out = csv.writer(sys.stdout)
        out.writerow(names)
        out.writerows(rows)
    elif fmt == "json":
        for row in rows:
            print(json.dumps(dict(zip(names, row, strict=True)), default=str))
    else:
        table = Table(*names)
        for row in rows:
            table.add_row(*("NULL" if v is None else str(v) for v in row))
        Console().print(table)
