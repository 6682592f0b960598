"""A replace on a guess (``Sink.replace(guess=...)``), on every sink: the rows' one job is
collected into the driver as Arrow as the tasks finish (or as ``HandedRows`` hand them over),
and written only if the guess holds and they fit in ``guess_bytes``; else nothing is written
(``sinks.guessed_rows``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from replay.sinks import duckdb_files
from replay.sinks.duckdb_sink import ARROW_BYTES
from replay.sinks.guessed_rows import GUESS_BYTES
from replay.sinks.protocol import GuessFailedError
from replay.spark import F
from tests.replay.sinks.batches import P0, SPEC, SinkFactory, row, snapshot

pytestmark = pytest.mark.integration
Factory = Callable[..., Any]
KINDS = ["duckdb", "delta"]


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    """Each sink that takes a guess."""
    return str(request.param)


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


def _one_row(make_sink: SinkFactory, rows: Factory, kind: str) -> Any:
    """A sink whose table holds row 1 at offset 1."""
    sink = make_sink(kind)
    sink.replace(SPEC, rows(row(1, "a")), {P0: 1})
    return sink


def _spread(spark: Any, rows: Factory, count: int) -> Any:
    """``count`` rows of the test table over four partitions (a task, a batch each)."""
    return rows(*(row(k, f"n{k}") for k in range(count))).repartition(4)


def test_a_guess_that_holds_is_written_from_the_staged_batches(
    spark: Any, make_sink: SinkFactory, rows: Factory, kind: str
) -> None:
    sink, guess = make_sink(kind), ToldGuess(True)
    entry = sink.replace(SPEC, _spread(spark, rows, 40), {P0: 40}, guess=guess)
    assert entry is not None and entry.positions == {P0: 40}
    assert snapshot(sink) == sorted(row(k, f"n{k}") for k in range(40))
    # Asked as each task's batch came, with the bytes so far; whether it held once, at the end
    assert len(guess.staged) == 4 and len(set(guess.staged)) == 4 and guess.asked == 1


def test_a_guess_that_fails_writes_nothing(
    spark: Any, make_sink: SinkFactory, rows: Factory, kind: str
) -> None:
    sink = _one_row(make_sink, rows, kind)
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

    pause = F.udf(lambda p: slow(p), "int")  # (no type hints: a plain UDF, not a pandas one)
    keys = spark.range(400_000, numPartitions=4).withColumn("p", F.spark_partition_id())
    frame = keys.where(pause("p") >= 0).select(
        F.col("id"), F.concat(F.lit("n"), F.col("id")).alias("name"),
        (F.col("id").cast("decimal(12,2)") + F.lit(0.25)).cast("decimal(12,2)").alias("amount"),
    )  # fmt: skip
    assert frame.schema.simpleString() == rows().schema.simpleString()
    return frame


@pytest.mark.parametrize(
    ("told", "error"),
    [
        (lambda: ToldGuess(True, factor=1 << 30), "would take over 1048576 bytes"),
        (lambda: ToldGuess(True, fails_after=1), "found what the guess ruled out"),
    ],
    ids=["past-memory", "told-wrong"],
)
def test_a_hopeless_guess_stops_the_job_at_once_and_writes_nothing(
    spark: Any,
    make_sink: SinkFactory,
    rows: Factory,
    told: Callable[[], ToldGuess],
    error: str,
    kind: str,
) -> None:
    """The first batch projects past ``guess_bytes``, or the guess already fails: the job is
    cancelled there (its slow tasks never finish), and over by the time ``replace`` fails;
    whether the guess holds is not even asked; the table is as it was."""
    sink, guess = _one_row(make_sink, rows, kind), told()
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
    spark: Any, make_sink: SinkFactory, rows: Factory, kind: str
) -> None:
    sink = _one_row(make_sink, rows, kind)
    guess = ToldGuess(False)
    assert sink.replace(SPEC, _spread(spark, rows, 40), {P0: 1}, guess=guess) is None
    assert guess.staged == [] and guess.asked == 0


def test_each_sink_holds_its_own_bound(make_sink: SinkFactory) -> None:
    assert make_sink("duckdb").guess_bytes == ARROW_BYTES
    assert make_sink("delta").guess_bytes == GUESS_BYTES


class ArrowRows:
    """``HandedRows`` in memory: an Arrow table of ``toArrow``'s types, handed over in two
    halves (``keep_going`` asked after each); ``collected`` counts the calls."""

    def __init__(self, frame: Any) -> None:
        self.columns, self.schema, self.table = frame.columns, frame.schema, frame.toArrow()
        self.collected = 0

    def collect(self, keep_going: Callable[[int], bool]) -> Any | None:
        self.collected += 1
        half = self.table.num_rows // 2
        for staged in (self.table.slice(0, half).nbytes, self.table.nbytes):
            if not keep_going(staged):
                return None
        return self.table


TYPED = (
    "id BIGINT, at TIMESTAMP, day DATE, amount DECIMAL(20,4), name STRING, raw BINARY,"
    " tags ARRAY<STRING>, inner STRUCT<n: INT, s: STRING>, __pos STRING"
)


def _typed(spark: Any) -> Any:
    """Rows of every kind of column a table may have, nulls among them (``TYPED``)."""
    moment = datetime(2024, 2, 29, 23, 59, 58, 123456, tzinfo=UTC)
    values: list[tuple[Any, ...]] = [
        (k, moment - timedelta(days=400 * k), date(1969, 12, 31) + timedelta(days=k * 97),
         Decimal(k) / 8, f"n{k}\u00e9", bytes([k, 0, 255]), [f"t{k}", None], (k, f"s{k}"),
         f"{k:08d}")
        for k in range(1, 6)
    ]  # fmt: skip
    values.append((9, None, None, None, None, None, None, None, "00000009"))
    return spark.createDataFrame(values, TYPED)


def _stored(sink: Any) -> tuple[list[Any], list[Any]]:
    """The DuckDB table's columns (name, DuckDB type) and rows, as DuckDB holds them
    (timestamps in microseconds)."""
    types = duckdb_files.query(
        sink.path, "SELECT column_name, data_type FROM information_schema.columns"
        f" WHERE table_name = '{SPEC.name}' ORDER BY ordinal_position",
    )[1]  # fmt: skip
    rows = f'SELECT * REPLACE (epoch_us("at") AS "at") FROM "{SPEC.name}" ORDER BY id'
    return types, duckdb_files.query(sink.path, rows)[1]


def test_handed_rows_are_written_as_the_frame_would_be(
    spark: Any, make_sink: SinkFactory, kind: str
) -> None:
    """Rows handed over as Arrow (``HandedRows``) make the table their frame makes: timestamps,
    dates, decimals, text, bytes, arrays, structs and nulls alike, ``__pos`` kept."""
    frame = _typed(spark)
    by_frame, by_arrow = make_sink(kind), make_sink(kind)
    handed = ArrowRows(frame)
    assert by_frame.replace(SPEC, frame, {P0: 9}, guess=ToldGuess(True)) is not None
    entry = by_arrow.replace(SPEC, handed, {P0: 9}, guess=ToldGuess(True))
    assert entry is not None and entry.positions == {P0: 9} and handed.collected == 1
    assert snapshot(by_arrow) == snapshot(by_frame) and len(snapshot(by_arrow)) == 6
    assert by_arrow.read(SPEC.name).schema == by_frame.read(SPEC.name).schema
    if kind == "duckdb":
        assert _stored(by_arrow) == _stored(by_frame)
    else:  # ``read`` drops ``__pos``: the table's files keep it
        path: Any = by_arrow.root / SPEC.name  # type: ignore[attr-defined]
        table = spark.read.format("delta").load(str(path)).select("id", "__pos")
        assert sorted(map(tuple, table.collect())) == [(k, f"{k:08d}") for k in (1, 2, 3, 4, 5, 9)]


def test_handed_rows_stopped_or_failed_write_nothing(
    spark: Any, make_sink: SinkFactory, kind: str
) -> None:
    sink, frame = make_sink(kind), _typed(spark)
    bound = sink.guess_bytes
    sink.guess_bytes = 1  # the first half is past it: stopped there
    with pytest.raises(GuessFailedError, match="would take over 1 bytes"):
        sink.replace(SPEC, ArrowRows(frame), {P0: 9}, guess=ToldGuess(True))
    sink.guess_bytes = bound
    with pytest.raises(GuessFailedError, match="found what the guess ruled out"):
        sink.replace(SPEC, ArrowRows(frame), {P0: 9}, guess=ToldGuess(False))
    with pytest.raises(TypeError, match="come with a guess"):
        sink.replace(SPEC, ArrowRows(frame), {P0: 9})
    assert sink.positions(SPEC.name) == {} and sink.tables() == []
