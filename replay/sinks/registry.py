"""Opens a sink from its URL: ``duckdb:///abs/path.duckdb`` or ``delta:///abs/dir``.

A DuckDB URL names one database file holding every table; a Delta URL names a directory in which
each table (and its ``<table>__tombstones`` companion) is a subdirectory.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlparse

from cdc.errors import UsageError
from replay.sinks.protocol import Sink
from replay.spark import SparkSession

SCHEMES = ("duckdb", "delta")


def sink_path(url: str) -> tuple[str, Path]:
    """``(scheme, absolute local path)`` of a sink URL; UsageError if it is not one."""
    parsed = urlparse(url)
    if parsed.scheme not in SCHEMES:
        raise UsageError(f"sink URL {url!r}: scheme must be one of {', '.join(SCHEMES)}")
    if parsed.netloc or not parsed.path.startswith("/"):
        raise UsageError(f"sink URL {url!r}: expected {parsed.scheme}:///absolute/path")
    return parsed.scheme, Path(unquote(parsed.path))


def sink_url(scheme: str, path: str | Path) -> str:
    """The URL of the ``scheme`` sink at the local ``path``."""
    if scheme not in SCHEMES:
        raise UsageError(f"unknown sink scheme {scheme!r}; expected one of {', '.join(SCHEMES)}")
    return f"{scheme}://{Path(path).resolve()}"


def require_stored(url: str, table: str) -> None:
    """Raise :class:`UsageError` when ``url`` holds no ``table`` (no database file or no such
    table in it, no Delta table directory), before any Spark work; nothing is created."""
    scheme, path = sink_path(url)
    if scheme == "duckdb" and not path.is_file():
        raise UsageError(f"no DuckDB database at {path} (table {table} of {url})")
    if scheme == "duckdb":
        from replay.sinks import duckdb_files

        with duckdb_files.read_only(path) as conn:
            if not duckdb_files.table_exists(conn, table):
                raise UsageError(f"no table {table} in {url}")
    if scheme == "delta" and not (path / table / "_delta_log").is_dir():
        raise UsageError(f"no Delta table {table} in {path}")


def open_sink(url: str, spark: SparkSession) -> Sink:
    """The sink at ``url``, created on first write (the caller closes it)."""
    scheme, path = sink_path(url)
    if scheme == "duckdb":
        from replay.sinks.duckdb_sink import DuckDBSink

        return DuckDBSink(path, spark)
    from replay.sinks.delta_sink import DeltaSink

    return DeltaSink(path, spark)
