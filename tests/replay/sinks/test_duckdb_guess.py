"""A replace on a guess (``Sink.replace(guess=...)``): DuckDB runs the rows' one job, stages
them as Arrow as the tasks finish, and writes them only if the guess holds and they fit in
memory; Delta, whose job commits, takes no guess."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from replay.sinks import duckdb_sink
from replay.sinks.protocol import GuessFailedError
from tests.replay.sinks.batches import P0, SPEC, SinkFactory, row, snapshot

pytestmark = pytest.mark.integration
Factory = Callable[..., Any]


class ToldGuess:
    """A guess that holds or not as told, projecting the staged bytes ``factor`` times; it
    notes what the sink asked."""

    def __init__(self, holds: bool, factor: int = 1) -> None:
        self.told, self.factor = holds, factor
        self.staged: list[int] = []
        self.asked = 0

    def projected(self, staged_bytes: int) -> int:
        self.staged.append(staged_bytes)
        return staged_bytes * self.factor

    def holds(self) -> bool:
        self.asked += 1
        return self.told


def _spread(spark: Any, rows: Factory, count: int) -> Any:
    """``count`` rows of the test table over four partitions (a task, a batch each)."""
    return rows(*(row(k, f"n{k}") for k in range(count))).repartition(4)


def test_a_guess_that_holds_is_written_from_the_staged_batches(
    spark: Any, make_sink: SinkFactory, rows: Factory
) -> None:
    sink, guess = make_sink("duckdb"), ToldGuess(True)
    entry = sink.replace(SPEC, _spread(spark, rows, 40), {P0: 40}, guess=guess)
    assert entry is not None and entry.positions == {P0: 40}
    assert snapshot(sink) == sorted(row(k, f"n{k}") for k in range(40))
    # Asked as each task's batch came, with the bytes so far; whether it held once, at the end
    assert len(guess.staged) == 4 and guess.staged == sorted(guess.staged) and guess.asked == 1


def test_a_guess_that_fails_writes_nothing(
    spark: Any, make_sink: SinkFactory, rows: Factory
) -> None:
    sink = make_sink("duckdb")
    sink.replace(SPEC, rows(row(1, "a")), {P0: 1})
    guess = ToldGuess(False)
    with pytest.raises(GuessFailedError, match="found what the guess ruled out"):
        sink.replace(SPEC, _spread(spark, rows, 40), {P0: 40}, guess=guess)
    assert guess.asked == 1 and len(guess.staged) == 4
    assert snapshot(sink) == [row(1, "a")] and sink.positions(SPEC.name) == {P0: 1}
    assert len(sink.history(SPEC.name)) == 1


def test_rows_projected_past_memory_stop_the_job_and_write_nothing(
    spark: Any, make_sink: SinkFactory, rows: Factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first batch projects past ``ARROW_BYTES``: the job is cancelled there, and over by
    the time ``replace`` fails; the guess is not even asked; the table is as it was."""
    sink = make_sink("duckdb")
    sink.replace(SPEC, rows(row(1, "a")), {P0: 1})
    monkeypatch.setattr(duckdb_sink, "ARROW_BYTES", 1 << 20)
    guess = ToldGuess(True, factor=1 << 30)
    with pytest.raises(GuessFailedError, match="would take over 1048576 bytes"):
        sink.replace(SPEC, _spread(spark, rows, 40), {P0: 40}, guess=guess)
    assert len(guess.staged) == 1 and guess.asked == 0
    assert spark.sparkContext.statusTracker().getActiveJobsIds() == []
    assert snapshot(sink) == [row(1, "a")] and sink.positions(SPEC.name) == {P0: 1}


def test_a_covered_replace_runs_no_job_and_asks_nothing(
    spark: Any, make_sink: SinkFactory, rows: Factory
) -> None:
    sink = make_sink("duckdb")
    sink.replace(SPEC, rows(row(1, "a")), {P0: 1})
    guess = ToldGuess(False)
    assert sink.replace(SPEC, _spread(spark, rows, 40), {P0: 1}, guess=guess) is None
    assert guess.staged == [] and guess.asked == 0


def test_delta_takes_no_guess(spark: Any, make_sink: SinkFactory, rows: Factory) -> None:
    sink = make_sink("delta")
    assert not sink.stages_rows and make_sink("duckdb").stages_rows
    with pytest.raises(ValueError, match="cannot wait on a guess"):
        sink.replace(SPEC, rows(row(1, "a")), {P0: 1}, guess=ToldGuess(True))
    assert sink.positions(SPEC.name) == {}
