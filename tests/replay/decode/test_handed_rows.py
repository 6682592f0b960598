"""A first rebuild's rows handed over as Arrow files by the tasks (``handed_rows``): stopped
when the sink says so, with nothing left behind; a value Arrow cannot hold named where it is.
(The table they make is the cached way's: ``test_clean_guess``.)"""

from __future__ import annotations

import tempfile
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from replay.decode.handed_rows import (
    NOT_HANDED_OVER,
    TaskFileRows,
    in_local_files,
    is_not_handed_over,
    live_range,
)  # fmt: skip
from replay.decode.key_tally import per_range_accumulator
from replay.decode.schema import TopicSchema
from replay.reading.bounds import Bound, BoundKind
from replay.reading.plan import ReplayPlan, plan_replay
from replay.spark import T
from replay.tables.topic_schema import newest_schema
from tests.replay.decode.conftest import Changelog, Written, account

pytestmark = pytest.mark.integration


def _written(written: Written, count: int) -> tuple[str, ReplayPlan, TopicSchema]:
    """``count`` accounts over two partitions of a new topic: its stream's URL, plan, schema."""
    log = Changelog(partitions=2)
    for i in range(1, count + 1):
        log.upsert(None, account(i, balance=Decimal(i)))
    stream = written(log)
    plan = plan_replay(stream, [log.topic], Bound(BoundKind.EARLIEST), Bound(BoundKind.LATEST))
    return stream.url, plan, newest_schema(stream, log.topic, None)


def test_the_test_session_hands_rows_over_in_files(spark: Any) -> None:
    assert in_local_files(spark)


@pytest.mark.parametrize("written", ["local"], indirect=True)
def test_a_stopped_job_is_cancelled_and_leaves_no_files(
    spark: Any, written: Written, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, plan, schema = _written(written, 40)
    made: list[str] = []
    mkdtemp = tempfile.mkdtemp

    def noted(**kwargs: Any) -> str:
        made.append(mkdtemp(**kwargs))
        return made[-1]

    monkeypatch.setattr(tempfile, "mkdtemp", noted)
    findings = per_range_accumulator(spark)
    rows = TaskFileRows(spark, url, plan, schema, findings, 1 << 20)
    asked: list[int] = []

    def stop(staged: int) -> bool:
        asked.append(staged)
        return False

    assert rows.collect(stop) is None
    assert asked and made and not Path(made[0]).exists()
    assert spark.sparkContext.statusTracker().getActiveJobsIds() == []
    whole = rows.collect(lambda _: True)
    assert (
        whole is not None
        and whole.num_rows == 40
        and whole.column_names == [*schema.row_type().names, "__pos"]
    )
    assert len(made) == 2 and not Path(made[1]).exists()


@pytest.mark.parametrize("written", ["local"], indirect=True)
def test_a_value_arrow_cannot_hold_is_named_where_it_is(
    spark: Any, written: Written, tmp_path: Path
) -> None:
    """Rows whose values do not fit the Arrow types (here: ``name`` said to be a number) stop
    the task with ``NOT_HANDED_OVER``, the range's topic, partition and first offset in the
    error."""
    url, plan, schema = _written(written, 5)
    r = next(r for r in plan.ranges if r.span > 0)
    fields = [*schema.row_type().fields, T.StructField("__pos", T.StringType())]
    out = T.StructType(
        [f if f.name != "name" else T.StructField("name", T.LongType()) for f in fields]
    )
    findings = per_range_accumulator(spark)
    task = live_range(url, schema, 1 << 30, findings, 1 << 20, str(tmp_path), out, [r])
    with pytest.raises(RuntimeError) as error:
        list(task)
    where = f"{r.tp.topic} partition {r.tp.partition} from offset {r.start}"
    assert str(error.value).startswith(f"{NOT_HANDED_OVER}: {where}: ")
    assert is_not_handed_over(error.value)
