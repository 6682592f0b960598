"""A first rebuild on a guess that cannot be confirmed or kept: the rows past the driver's
bound, a compaction task past its budget, rows Arrow cannot hold, any other error; a range whose
findings are missing (``clean_guess``)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from replay.decode.clean_guess import CleanGuess, Guessed, replaced_on_guess
from replay.decode.compaction import ANYTHING
from replay.decode.handed_rows import NOT_HANDED_OVER
from replay.decode.task_survey import range_key
from replay.reading.bounds import Bound, BoundKind
from replay.reading.plan import plan_replay
from replay.sinks.protocol import TableSpec
from replay.spark import DataFrame
from replay.tables.topic_schema import newest_schema
from tests.replay.decode.conftest import Written
from tests.replay.decode.test_clean_guess import _clean

pytestmark = pytest.mark.integration


class FailingSink:
    """A sink that stages rows (``guess_bytes``) and whose replace fails as a Spark job would."""

    guess_bytes, url = 1 << 20, "failing://"

    def __init__(self, error: str) -> None:
        self.error = error

    def replace(self, *_: Any, **__: Any) -> Any:
        raise RuntimeError(self.error)


@pytest.mark.parametrize("written", ["local"], indirect=True)
@pytest.mark.parametrize(
    ("error", "guessed", "logged"),
    [
        (
            "Job aborted: Total size of serialized results of 3 tasks (1030.2 MiB) is bigger"
            " than spark.driver.maxResultSize (1024.0 MiB)",
            Guessed(False), "the rows passed spark.driver.maxResultSize; rebuilding accounts",
        ),
        (
            "An error occurred while calling o1.getResult.\n: org.apache.spark.SparkException:"
            " compaction task over its memory budget: t partition 0 holds 1100 MiB\n\tat x",
            Guessed(False, over_budget=True),
            "compaction task over its memory budget: t partition 0 holds 1100 MiB; compacting",
        ),
        (
            "An error occurred while calling o1.collect.\n: org.apache.spark.SparkException:"
            f" {NOT_HANDED_OVER}: t partition 2 from offset 7: InvalidOperation: [...]\n\tat x",
            Guessed(False),
            f"{NOT_HANDED_OVER}: t partition 2 from offset 7: InvalidOperation: [...];"
            " rebuilding accounts the cached way",
        ),
    ],
)  # fmt: skip
def test_a_job_past_the_driver_or_task_bound_falls_back(
    spark: Any, written: Written, error: str, guessed: Guessed, logged: str,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    """The rows past the driver's bound on results, a compaction task past its budget, or rows
    Arrow cannot hold: not done (the cached way then takes over; over budget, straight to the
    two Spark passes); any other error is the rebuild's."""
    log, _ = _clean()
    stream = written(log)
    schema = newest_schema(stream, log.topic, None)
    plan = plan_replay(stream, [log.topic], Bound(BoundKind.EARLIEST), Bound(BoundKind.LATEST))
    spec = TableSpec("accounts", schema.primary_key)
    sink: Any = FailingSink(error)
    with caplog.at_level(logging.INFO, logger="replay.decode.clean_guess"):
        assert replaced_on_guess(spark, sink, stream.url, spec, schema, plan) == guessed
    assert [r.getMessage() for r in caplog.records if logged in r.getMessage()] != []
    with pytest.raises(RuntimeError, match="a disk failed"):
        other: Any = FailingSink("a disk failed")
        replaced_on_guess(spark, other, stream.url, spec, schema, plan)


def _count(rows: Any) -> int:
    """The rows of a ``CleanGuess`` (a frame, or handed over: ``HandedRows``)."""
    return (
        int(rows.count()) if isinstance(rows, DataFrame) else rows.collect(lambda _: True).num_rows
    )


@pytest.mark.parametrize("written", ["local"], indirect=True)
@pytest.mark.parametrize("handed", [True, False], ids=["files", "frame"])
def test_a_range_that_told_nothing_fails_the_guess(
    spark: Any, written: Written, handed: bool
) -> None:
    """Spark logs an accumulator update it fails to merge and goes on: a range whose findings
    are missing could hold anything, so the guess does not hold (``survey_taken``: ANYTHING)."""
    log, _ = _clean()
    stream = written(log)
    schema = newest_schema(stream, log.topic, None)
    plan = plan_replay(stream, [log.topic], Bound(BoundKind.EARLIEST), Bound(BoundKind.LATEST))
    whole = CleanGuess(spark, stream.url, plan, schema, 1 << 20, handed=handed)
    assert _count(whole.rows) == len(_clean()[1]) and not whole.failed() and whole.holds()
    cut = CleanGuess(spark, stream.url, plan, schema, 1 << 20, handed=handed)
    assert _count(cut.rows) == len(_clean()[1])
    del cut._findings.value[range_key(plan.ranges[1])]
    assert not cut.failed() and not cut.holds() and cut.found == ANYTHING
