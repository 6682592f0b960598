"""A DuckDB replace on a ``Guess`` (a first rebuild in one job: ``decode.clean_guess``): the
rows' job staged as one Arrow table as its tasks finish, written only if the guess holds.

The rows are a DataFrame, collected as Arrow (``spark.collect_arrow``, its batches read as the
tasks finish), or ``HandedRows``, whose own job hands them to the driver. Either way the guess is
asked as the job goes: the job is stopped as soon as the rows project past the sink's bound
(``guess_bytes``) or the finished tasks tell the guess wrong, and the write's transaction sees
the table only if the finished job's guess holds; else ``GuessFailedError`` and nothing is
written.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from replay.sinks.duckdb_store import quote
from replay.sinks.duckdb_types import staged_arrow, staged_columns
from replay.sinks.protocol import Guess, GuessFailedError, HandedRows
from replay.spark import DataFrame, T, collect_arrow

Staged = Callable[[Any], str]
"""Given the write's DuckDB connection, the relation (FROM-clause text) of a staged frame."""
_arrow_names = itertools.count()


@contextmanager
def guessed(
    rows: DataFrame | HandedRows, fields: Sequence[T.StructField], guess: Guess, most: int,
    url: str,
) -> Iterator[Staged]:  # fmt: skip
    """Run the rows' job and stage ``fields`` of them as one Arrow table, if ``guess`` holds
    and the table stays within ``most`` bytes (both checked as its tasks finish, the job
    stopped as soon as either fails); else ``GuessFailedError`` (``url``: the sink's)."""

    def hopeful(staged: int) -> bool:
        return max(staged, guess.projected(staged)) <= most and not guess.failed()

    if isinstance(rows, DataFrame):
        table = collect_arrow(rows.select(*staged_columns(fields)), hopeful)
    elif (handed := rows.collect(hopeful)) is not None:
        table = staged_arrow(handed, fields)
    else:
        table = None
    if table is None and not guess.failed():
        raise GuessFailedError(f"{url}: the rows would take over {most} bytes")
    if table is None or not guess.holds():
        raise GuessFailedError(f"{url}: the rows' job found what the guess ruled out")
    yield registered(table)


def registered(table: Any) -> Staged:
    """An Arrow table staged: registered with the write's connection under a name of its own."""
    name = f"__replicator_arrow_{next(_arrow_names)}"

    def register(conn: Any) -> str:
        conn.register(name, table)
        return quote(name)

    return register
