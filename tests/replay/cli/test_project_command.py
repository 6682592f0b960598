"""``replicator project`` as a user runs it (in this process, on the session's SparkSession):
the first run builds and serves version 1 of the seeds' projection, a second run catches it up,
``--rebuild`` builds, verifies and swaps in version 2, ``--rollback`` serves version 1 again;
bad input exits 2 with the reason."""

from __future__ import annotations

import random
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from cdc.streams.local import LocalLog
from cdc.streams.protocol import TopicPartition
from projections import version_table
from replay.cli.main import main
from replay.projection.engine import ProjectionEngine
from replay.projection.store import projection_store
from replay.projection.versions import ProjectionVersions
from replay.sinks.registry import open_sink
from tests.projections.sql.workload import SEED, SourceMirror
from tests.replay.projection.workload import SalesTopic

pytestmark = pytest.mark.integration


def _ops(rng: random.Random, count: int) -> list[tuple[Any, ...]]:
    ops: list[tuple[Any, ...]] = []
    for _ in range(count):
        row = {"title": rng.choice(["Dune", "Heat", "Zodiac"]), "region": "eu",
               "total_ticket_value": rng.choice([Decimal("9.50"), None]), "seats": 1,
               "refunded": False}  # fmt: skip
        ops.append(rng.choice([("insert", row), ("insert", row), ("update", rng.randrange(40), row),
                               ("delete", rng.randrange(40))]))  # fmt: skip
    return ops


def _expected(mirror: SourceMirror) -> list[tuple[Any, ...]]:
    sold: dict[Any, int] = {}
    for row in mirror.rows.values():
        sold[row["title"]] = sold.get(row["title"], 0) + (row["total_ticket_value"] is not None)
    return sorted(sold.items(), key=repr)


def _served(spark: Any, log: LocalLog, sink_url: str) -> tuple[list[tuple[Any, ...]], Any]:
    sink = open_sink(sink_url, spark)
    try:
        versions = ProjectionVersions(ProjectionEngine(spark, log, sink), "movie_tickets_sold")
        return sorted(versions.rows(), key=repr), versions.state().active
    finally:
        sink.close()


def test_project_build_catch_up_rebuild_rollback(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = LocalLog.from_url(f"local://{tmp_path}/log")
    topic, mirror, rng = SalesTopic(log), SourceMirror({}), random.Random(11)
    sink_url = f"duckdb://{tmp_path}/out.duckdb"
    cli = ["project", "--stream", f"local://{tmp_path}/log", "--sink", sink_url, "--sql", SEED]

    topic.write(mirror.changes(_ops(rng, 30)))
    assert main(cli) == 0
    out = capsys.readouterr().out
    assert "rebuild" in out and "lag per partition 0:0, 1:0" in out, out  # a first build
    assert _served(spark, log, sink_url) == (_expected(mirror), 1)

    topic.write(mirror.changes(_ops(rng, 20)))
    assert main(cli) == 0
    assert "catch-up" in capsys.readouterr().out
    assert _served(spark, log, sink_url) == (_expected(mirror), 1)
    assert main(cli) == 0
    assert "up-to-date" in capsys.readouterr().out

    topic.write(mirror.changes(_ops(rng, 10)))
    assert main([*cli, "--rebuild"]) == 0
    assert "version 2 swapped in" in capsys.readouterr().out
    assert _served(spark, log, sink_url) == (_expected(mirror), 2)

    assert main([*cli, "--rollback"]) == 0
    assert "serving version 1" in capsys.readouterr().out
    assert _served(spark, log, sink_url)[1] == 1
    # version 1 was left at the offsets it had applied; the next run catches it up
    assert main(cli) == 0
    assert _served(spark, log, sink_url) == (_expected(mirror), 1)


def test_project_rejects_bad_input_with_the_reason(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = LocalLog.from_url(f"local://{tmp_path}/log")
    SalesTopic(log).write(SourceMirror({}).changes(_ops(random.Random(2), 3)))
    base = ["project", "--stream", f"local://{tmp_path}/log", "--sink",
            f"duckdb://{tmp_path}/out.duckdb"]  # fmt: skip
    distinct = "CREATE TABLE t AS SELECT DISTINCT title FROM movie_ticket_sales"
    assert main([*base, "--sql", distinct]) == 2
    assert "SELECT DISTINCT" in capsys.readouterr().err
    assert main([*base, "--sql", SEED, "--topic", "no.such_topic"]) == 2
    assert "no.such_topic" in capsys.readouterr().err
    other = "CREATE TABLE t AS SELECT title, COUNT(*) AS n FROM refunds GROUP BY title"
    assert main([*base, "--sql", other]) == 2
    assert "refunds" in capsys.readouterr().err


@pytest.mark.parametrize("sink", ["duckdb", "delta"])
def test_a_catch_up_over_a_bad_record_fails_with_it_and_writes_nothing(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], sink: str
) -> None:
    log = LocalLog.from_url(f"local://{tmp_path}/log")
    topic, mirror = SalesTopic(log), SourceMirror({})
    topic.write(mirror.changes(_ops(random.Random(5), 12)))
    sink_url = f"{sink}://{tmp_path}/out" + (".duckdb" if sink == "duckdb" else "")
    cli = ["project", "--stream", f"local://{tmp_path}/log", "--sink", sink_url, "--sql", SEED]
    assert main(cli) == 0
    capsys.readouterr()
    before = _served(spark, log, sink_url)
    positions = {p: log.bounds(topic.topic, p).end for p in range(2)}

    topic.write(mirror.changes(_ops(random.Random(6), 6)))  # good changes, then a bad record
    bad_offset = log.bounds(topic.topic, 1).end
    writer = log.writer("bad-record-writer")
    writer.begin()
    writer.send(topic.topic, b'{"id": 1}', b"{not json", partition=1)
    writer.commit()

    assert main(cli) == 2
    err = capsys.readouterr().err
    assert f"{topic.topic}" in err and "partition 1" in err and f"offset {bad_offset}" in err, err
    assert _served(spark, log, sink_url) == before  # the good changes of the batch neither
    stored = open_sink(sink_url, spark)
    try:
        ledger = projection_store(stored).positions(version_table("movie_tickets_sold", 1))
        assert ledger == {TopicPartition(topic.topic, p): o for p, o in positions.items()}
    finally:
        stored.close()
