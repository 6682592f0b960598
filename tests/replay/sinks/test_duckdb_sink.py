"""DuckDB specifics: faithful type mapping, the ledger table, one current version only."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest

from replay.sinks import duckdb_files
from replay.sinks.duckdb_sink import DuckDBSink
from replay.sinks.ledger import VersionUnavailableError
from replay.sinks.protocol import TableSpec
from replay.spark import F
from tests.replay.sinks.batches import P0, P1, SPEC, SinkFactory, row, snapshot, upsert

pytestmark = pytest.mark.integration
Factory = Callable[..., Any]
UTC = dt.UTC

TYPED_SCHEMA = (
    "id BIGINT, i INT, s SMALLINT, b TINYINT, f FLOAT, d DOUBLE, ok BOOLEAN, txt STRING,"
    " raw BINARY, day DATE, ts TIMESTAMP, ntz TIMESTAMP_NTZ, big DECIMAL(38,10),"
    " money DECIMAL(9,2), tags ARRAY<INT>, point STRUCT<x: INT, label: STRING>,"
    " attrs MAP<STRING, BIGINT>"
)
DUCKDB_TYPES = [
    ("id", "BIGINT"),
    ("i", "INTEGER"),
    ("s", "SMALLINT"),
    ("b", "TINYINT"),
    ("f", "FLOAT"),
    ("d", "DOUBLE"),
    ("ok", "BOOLEAN"),
    ("txt", "VARCHAR"),
    ("raw", "BLOB"),
    ("day", "DATE"),
    ("ts", "TIMESTAMP WITH TIME ZONE"),
    ("ntz", "TIMESTAMP"),
    ("big", "DECIMAL(38,10)"),
    ("money", "DECIMAL(9,2)"),
    ("tags", "INTEGER[]"),
    ("point", 'STRUCT(x INTEGER, "label" VARCHAR)'),
    ("attrs", "MAP(VARCHAR, BIGINT)"),
    ("__pos", "VARCHAR"),
]
TYPED_ROWS = [
    (
        1,
        7,
        -3,
        5,
        1.5,
        2.25,
        True,
        "héllo",
        b"\x00\xff",
        dt.date(2024, 5, 6),
        dt.datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=UTC),
        dt.datetime(2024, 1, 2, 3, 4, 5, 654321),
        Decimal("1234567890123456789012345678.0123456789"),
        Decimal("-12.34"),
        [1, None, 3],
        (1, "p"),
        {"k": 9},
    ),
    (
        2,
        8,
        None,
        None,
        None,
        None,
        None,
        None,
        None,
        dt.date(1000, 1, 1),
        dt.datetime(1, 1, 1, tzinfo=UTC),
        dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
        None,
        None,
        None,
        None,
        None,
    ),
]


def _duckdb(make_sink: SinkFactory) -> DuckDBSink:
    sink = make_sink("duckdb")
    assert isinstance(sink, DuckDBSink)
    return sink


def _as_json(df: Any) -> list[str]:
    """Rows rendered by Spark (Python cannot hold timestamps of year 1 in every time zone)."""
    return sorted(r[0] for r in df.select(F.to_json(F.struct(*df.columns))).collect())


@pytest.mark.parametrize("rows_at_most", [None, 1], ids=["parquet", "arrow"])
def test_spark_types_map_faithfully_to_duckdb_and_back(
    spark: Any, make_sink: SinkFactory, rows_at_most: int | None
) -> None:
    sink, spec = _duckdb(make_sink), TableSpec("typed", ("id", "i"))
    rows = spark.createDataFrame(TYPED_ROWS[:1], TYPED_SCHEMA)
    sink.replace(spec, rows, {P0: 1}, rows_at_most=rows_at_most)
    changes = spark.createDataFrame(
        [(*TYPED_ROWS[1], "u", "00000002", False)],
        f"{TYPED_SCHEMA}, __op STRING, __pos STRING, __truncated BOOLEAN",
    )
    sink.merge(spec, changes, {P0: 2}, rows_at_most=rows_at_most)

    with duckdb_files.read_only(sink.path) as conn:
        types, keys = _types_and_keys(conn)
    assert types == DUCKDB_TYPES
    assert keys == [(["id", "i"],)]
    back = sink.read("typed")
    assert back.schema == spark.createDataFrame([], TYPED_SCHEMA).schema
    assert _as_json(back) == _as_json(spark.createDataFrame(TYPED_ROWS, TYPED_SCHEMA))


def _types_and_keys(conn: Any) -> tuple[list[Any], list[Any]]:
    types = conn.execute(
        "SELECT column_name, data_type FROM information_schema.columns"
        " WHERE table_name = 'typed' ORDER BY ordinal_position"
    ).fetchall()
    keys = conn.execute(
        "SELECT constraint_column_names FROM duckdb_constraints()"
        " WHERE table_name = 'typed' AND constraint_type = 'PRIMARY KEY'"
    ).fetchall()
    return types, keys


def test_ledger_rows_share_the_data_transaction_and_only_the_current_version_reads(
    make_sink: SinkFactory, changes: Factory
) -> None:
    sink = _duckdb(make_sink)
    sink.merge(SPEC, changes(upsert(1, "a", 1)), {P0: 3, P1: 1})
    sink.merge(SPEC, changes(upsert(2, "b", 2)), {P1: 2})
    _, ledger = duckdb_files.query(
        sink.path,
        'SELECT table_name, version, topic, "partition", next_offset, mode'
        ' FROM _replicator_ledger ORDER BY version, "partition"',
    )
    assert ledger == [
        ("accounts", 0, "db.accounts", 0, 3, "merge"),
        ("accounts", 0, "db.accounts", 1, 1, "merge"),
        ("accounts", 1, "db.accounts", 0, 3, "merge"),
        ("accounts", 1, "db.accounts", 1, 2, "merge"),
    ]
    assert snapshot(sink, 1) == [row(1, "a"), row(2, "b")]
    with pytest.raises(VersionUnavailableError, match=r"only the current version \(1\)"):
        sink.read(SPEC.name, 0)
    with pytest.raises(VersionUnavailableError, match="no table missing"):
        sink.read("missing")


def test_a_failed_merge_rolls_back_and_leaves_no_staged_files(
    spark: Any, make_sink: SinkFactory, changes: Factory
) -> None:
    sink = _duckdb(make_sink)
    sink.merge(SPEC, changes(upsert(1, "a", 1)), {P0: 1})
    other = spark.createDataFrame(  # name retyped to INT: the stored "a" does not cast
        [(2, 7, None, "u", "00000002", False)],
        "id BIGINT, name INT, amount DECIMAL(12,2), __op STRING, __pos STRING, __truncated BOOLEAN",
    )
    with pytest.raises(ValueError, match="column name holds values that do not cast"):
        sink.merge(SPEC, other, {P0: 2})
    assert sink.positions(SPEC.name) == {P0: 1} and len(sink.history(SPEC.name)) == 1
    assert snapshot(sink) == [row(1, "a")]
    assert [p.name for p in sink.path.parent.iterdir() if "-stage-" in p.name] == []


def test_latest_is_the_newest_entry_of_its_own_table(
    make_sink: SinkFactory, changes: Factory
) -> None:
    """``latest`` (what a round reads several times instead of the whole history) is the last
    entry of ``history``, table by table, in a file holding two tables."""
    sink = _duckdb(make_sink)
    other = TableSpec("other_accounts", ("id",))
    assert sink.latest(SPEC.name) is None
    for i, spec in enumerate([SPEC, other, SPEC, SPEC, other]):
        sink.merge(spec, changes(upsert(i, f"v{i}", i + 1)), {P0: i + 1, P1: i})
    for name in (SPEC.name, other.name):
        history = sink.history(name)
        assert len(history) == (3 if name == SPEC.name else 2)
        assert sink.latest(name) == history[-1]
        assert sink.positions(name) == history[-1].positions


def test_a_writer_that_knows_a_stale_ledger_neither_applies_twice_nor_skips(
    spark: Any, make_sink: SinkFactory, changes: Factory
) -> None:
    """The pre-check trusts what this process last read or wrote only to let a batch through:
    a batch another process applied since is refused by the write's transaction, and a batch
    behind what this process knew is decided by a fresh read of the ledger (here: the file
    deleted and the table rebuilt to an earlier point by another process takes it)."""
    mine = _duckdb(make_sink)
    theirs = DuckDBSink(mine.path, spark)  # another process's sink on the same file
    assert mine.merge(SPEC, changes(upsert(1, "a", 1)), {P0: 10}) is not None
    assert theirs.merge(SPEC, changes(upsert(2, "b", 2)), {P0: 20}) is not None
    assert mine.merge(SPEC, changes(upsert(2, "again", 2)), {P0: 20}) is None
    assert snapshot(mine) == [row(1, "a"), row(2, "b")]
    assert mine.merge(SPEC, changes(upsert(3, "c", 3)), {P0: 30}) is not None
    mine.path.unlink()
    theirs.replace(SPEC, spark.createDataFrame([row(1, "z")], "id BIGINT, name STRING,"
                   " amount DECIMAL(12,2)"), {P0: 5})  # fmt: skip
    assert mine.merge(SPEC, changes(upsert(4, "d", 4)), {P0: 15}) is not None
    assert snapshot(mine) == [row(1, "z"), row(4, "d")]
    assert mine.positions(SPEC.name) == {P0: 15}


def test_a_replaced_table_keeps_its_key_and_a_repeated_key_replaces_nothing(
    make_sink: SinkFactory, rows: Factory
) -> None:
    sink = _duckdb(make_sink)
    sink.replace(SPEC, rows(row(1, "a"), row(2, "b")), {P0: 2})
    _, keys = duckdb_files.query(
        sink.path,
        "SELECT table_name, constraint_column_names FROM duckdb_constraints()"
        " WHERE constraint_type = 'PRIMARY KEY' AND table_name LIKE 'accounts%' ORDER BY 1",
    )
    assert keys == [("accounts", ["id"]), ("accounts__tombstones", ["id"])]
    with pytest.raises(Exception, match=r"(?i)duplicate key"):
        sink.replace(SPEC, rows(row(3, "c"), row(3, "d")), {P0: 4})
    assert snapshot(sink) == [row(1, "a"), row(2, "b")] and sink.positions(SPEC.name) == {P0: 2}
