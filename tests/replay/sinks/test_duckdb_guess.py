"""A replace on a guess (``Sink.replace(guess=...)``): DuckDB runs the rows' one job, stages
them as Arrow as the tasks finish, and writes them only if the guess holds and they fit in
memory; Delta, whose job commits, takes no guess."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from replay.sinks.duckdb_sink import ARROW_BYTES
from replay.sinks.protocol import GuessFailedError
from replay.spark import F
from tests.replay.sinks.batches import P0, SPEC, SinkFactory, row, snapshot

pytestmark = pytest.mark.integration
Factory = Callable[..., Any]


class ToldGuess:
    """A guess that holds or not as told, projecting the staged bytes ``factor`` times, failed
    once ``fails_after`` batches came; it notes what the sink asked."""

    def __init__(self, holds: bool, factor: int = 1, fails_after: int | None = None) -> None:
        self.told, self.factor, self.fails_after = holds, factor, fails_after
        self.staged: list[int] = []
        self.asked = 0

    def projected(self, staged_bytes: int) -> int:
        self.staged.append(staged_bytes)
        return staged_bytes * self.factor

    def failed(self) -> bool:
        return self.fails_after is not None and len(self.staged) >= self.fails_after

    def holds(self) -> bool:
        self.asked += 1
        return self.told


def _one_row(make_sink: SinkFactory, rows: Factory) -> Any:
    """A DuckDB sink whose table holds row 1 at offset 1."""
    sink = make_sink("duckdb")
    sink.replace(SPEC, rows(row(1, "a")), {P0: 1})
    return sink


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
    assert len(guess.staged) == 4 and len(set(guess.staged)) == 4 and guess.asked == 1


def test_a_guess_that_fails_writes_nothing(
    spark: Any, make_sink: SinkFactory, rows: Factory
) -> None:
    sink = _one_row(make_sink, rows)
    guess = ToldGuess(False)
    with pytest.raises(GuessFailedError, match="found what the guess ruled out"):
        sink.replace(SPEC, _spread(spark, rows, 40), {P0: 40}, guess=guess)
    assert guess.asked == 1 and len(guess.staged) == 4
    assert snapshot(sink) == [row(1, "a")] and sink.positions(SPEC.name) == {P0: 1}
    assert len(sink.history(SPEC.name)) == 1


def _slow_after_the_first(spark: Any, rows: Factory, seconds: float) -> Any:
    """400,000 rows of the test table over four partitions, all but the first taking
    ``seconds`` more (a partition's rows, a few MB as Arrow, pass Spark's buffer at once)."""
    slept: set[int] = set()

    def slow(partition: int) -> int:
        if partition and partition not in slept:
            slept.add(partition)
            time.sleep(seconds)
        return partition

    pause = F.udf(slow, "int")
    keys = spark.range(400_000, numPartitions=4).withColumn("p", F.spark_partition_id())
    frame = keys.where(pause("p") >= 0).select(
        F.col("id"), F.concat(F.lit("n"), F.col("id")).alias("name"),
        (F.col("id").cast("decimal(12,2)") + F.lit(0.25)).cast("decimal(12,2)").alias("amount"),
    )  # fmt: skip
    assert frame.schema.simpleString() == rows().schema.simpleString()
    return frame


@pytest.mark.parametrize(
    ("guess", "error"),
    [
        (ToldGuess(True, factor=1 << 30), "would take over 1048576 bytes"),
        (ToldGuess(True, fails_after=1), "found what the guess ruled out"),
    ],
    ids=["past-memory", "told-wrong"],
)
def test_a_hopeless_guess_stops_the_job_at_once_and_writes_nothing(
    spark: Any, make_sink: SinkFactory, rows: Factory, guess: ToldGuess, error: str
) -> None:
    """The first batch projects past ``guess_bytes``, or the guess already fails: the job is
    cancelled there (its slow tasks never finish), and over by the time ``replace`` fails;
    whether the guess holds is not even asked; the table is as it was."""
    sink = _one_row(make_sink, rows)
    sink.guess_bytes = 1 << 20
    tracker = spark.sparkContext.statusTracker()
    before = set(tracker.getJobIdsForGroup())
    started = time.monotonic()
    with pytest.raises(GuessFailedError, match=error):
        sink.replace(SPEC, _slow_after_the_first(spark, rows, 60.0), {P0: 40}, guess=guess)
    assert time.monotonic() - started < 50  # (the slow tasks sleep 60 s)
    assert len(guess.staged) == 1 and guess.asked == 0
    (job,) = set(tracker.getJobIdsForGroup()) - before
    assert tracker.getJobInfo(job).status == "FAILED"  # cancelled
    assert tracker.getActiveJobsIds() == []
    assert snapshot(sink) == [row(1, "a")] and sink.positions(SPEC.name) == {P0: 1}


def test_a_covered_replace_runs_no_job_and_asks_nothing(
    spark: Any, make_sink: SinkFactory, rows: Factory
) -> None:
    sink = _one_row(make_sink, rows)
    guess = ToldGuess(False)
    assert sink.replace(SPEC, _spread(spark, rows, 40), {P0: 1}, guess=guess) is None
    assert guess.staged == [] and guess.asked == 0


def test_delta_takes_no_guess(spark: Any, make_sink: SinkFactory, rows: Factory) -> None:
    sink = make_sink("delta")
    assert sink.guess_bytes is None and make_sink("duckdb").guess_bytes == ARROW_BYTES
    with pytest.raises(ValueError, match="cannot wait on a guess"):
        sink.replace(SPEC, rows(row(1, "a")), {P0: 1}, guess=ToldGuess(True))
    assert sink.positions(SPEC.name) == {}
