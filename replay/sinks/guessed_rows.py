"""A replace on a ``Guess`` (a first rebuild in one job: ``decode.clean_guess``): the rows'
job collected into the driver as one Arrow table as its tasks finish, checked before the sink
writes anything.

The rows are a DataFrame, collected as Arrow (``spark.collect_arrow``: its batches read as the
tasks finish, the job cancellable), or ``HandedRows``, whose own job hands them over (in local
mode, in files). The guess is asked as the job goes: the job is stopped as soon as the rows
project past the sink's bound (``Sink.guess_bytes``) or the finished tasks tell the guess wrong,
and the sink gets the table only if the finished job's guess holds; else ``GuessFailedError``,
and nothing is written. DuckDB then registers the table with its write's transaction, Delta
writes it from a frame of the driver's Arrow (its own job, which commits).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from replay.sinks.protocol import Guess, GuessFailedError, HandedRows
from replay.spark import DataFrame, collect_arrow, named_column

GUESS_BYTES = 256 * 2**20
"""The most bytes of Arrow a sink holds in the driver for a replace on a guess, by default."""


def guessed_arrow(
    rows: DataFrame | HandedRows, columns: Sequence[str], guess: Guess, most: int, url: str
) -> Any:
    """The rows' ``columns`` as one Arrow table of ``toArrow``'s types, if ``guess`` holds and
    the table stays within ``most`` bytes (both checked as the tasks finish, the job stopped as
    soon as either fails); else ``GuessFailedError`` (``url``: the sink's)."""

    def hopeful(staged: int) -> bool:
        return max(staged, guess.projected(staged)) <= most and not guess.failed()

    if isinstance(rows, DataFrame):
        table = collect_arrow(rows.select(*map(named_column, columns)), hopeful)
    elif (handed := rows.collect(hopeful)) is not None:
        table = handed.select(list(columns))
    else:
        table = None
    if table is None and not guess.failed():
        raise GuessFailedError(f"{url}: the rows would take over {most} bytes")
    if table is None or not guess.holds():
        raise GuessFailedError(f"{url}: the rows' job found what the guess ruled out")
    return table
