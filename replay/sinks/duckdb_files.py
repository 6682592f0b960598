"""Opening DuckDB database files so that a live read model stays readable from other processes.

DuckDB lets one process hold a database file read-write, or any number of processes hold it
read-only, never both at once (a file lock). So the sink holds its file only while it writes one
batch (or reads its ledger) and closes it in between, which also checkpoints the WAL into the
file; readers in other processes open it read-only between two writes. Both sides retry while the
other holds the lock, with a short backoff, up to a timeout: :func:`connect` for the sink,
:func:`read_only` and :func:`query` for readers (``replicator query`` on the command line).

This is the only module that imports :mod:`duckdb`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb

from cdc.errors import UnavailableError, UserError

READER_TIMEOUT_S = 30.0
QUERY_ERRORS: tuple[type[Exception], ...] = (duckdb.Error,)  # what bad SQL raises
WRITER_TIMEOUT_S = 120.0
_FIRST_DELAY_S, _MAX_DELAY_S = 0.002, 0.05


class DatabaseBusyError(UnavailableError, TimeoutError):
    """The database file stayed locked by another process for longer than the timeout."""


class DatabaseMissingError(UserError, FileNotFoundError):
    """A reader asked for a database file that does not exist (nothing is created)."""


def connect(path: str | Path, *, read_only: bool, timeout_s: float) -> Any:
    """A connection to the file at ``path``, retried while another process holds a conflicting
    lock; :class:`DatabaseBusyError` after ``timeout_s``. A read-only connection to a missing
    file is :class:`DatabaseMissingError`; a writable one creates the file."""
    path = Path(path)
    if read_only and not path.is_file():
        raise DatabaseMissingError(f"no DuckDB database at {path}")
    deadline = time.monotonic() + timeout_s
    delay = _FIRST_DELAY_S
    while True:
        try:
            return duckdb.connect(str(path), read_only=read_only)
        except duckdb.IOException as exc:
            if "lock" not in str(exc).lower():
                raise
            if time.monotonic() >= deadline:
                holder = str(exc).split("Conflicting lock is held in", 1)[-1].split(".")[0]
                raise DatabaseBusyError(
                    f"{path} stayed locked for {timeout_s:g}s (held by{holder}); a reader "
                    "must not keep the file open: open it per query (replay.sinks.duckdb_files)"
                ) from exc
            time.sleep(delay)
            delay = min(delay * 2, _MAX_DELAY_S)


@contextmanager
def read_only(path: str | Path, *, timeout_s: float = READER_TIMEOUT_S) -> Iterator[Any]:
    """A read-only DuckDB connection to a read model another process may be keeping live.

    Everything read through one connection is one consistent state: the tables and the
    ``_replicator_ledger`` positions they reflect. Keep it short: the writer waits while it is
    open.
    """
    conn = connect(path, read_only=True, timeout_s=timeout_s)
    try:
        yield conn
    finally:
        conn.close()


def query(
    path: str | Path, sql: str, params: Sequence[Any] = (), *, timeout_s: float = READER_TIMEOUT_S
) -> tuple[list[str], list[tuple[Any, ...]]]:
    """``(column names, rows)`` of one query on a live read model (see :func:`read_only`)."""
    with read_only(path, timeout_s=timeout_s) as conn:
        cursor = conn.execute(sql, list(params))
        names = [d[0] for d in cursor.description or []]
        return names, [tuple(r) for r in cursor.fetchall()]


def table_exists(conn: Any, table: str) -> bool:
    """Whether ``table`` exists in the connection's main schema."""
    row = conn.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'main'"
        " AND table_name = ?",
        [table],
    ).fetchone()
    return bool(row and row[0])
