"""Change batches as signed rows: +after, -before, resets at truncates; and the SQL forms."""

from __future__ import annotations

import duckdb
import pytest

from cdc.errors import ChangeEventError
from cdc.events import UNAVAILABLE
from projections import SIGN, signed_rows, signed_rows_sql
from projections.change_ops import RowChange
from projections.signed_rows import snapshot_signed_sql
from projections.sql.syntax import render

A, B = {"k": 1, "v": "a"}, {"k": 1, "v": "b"}


def test_each_op_signs_its_images() -> None:
    batch = signed_rows(
        [RowChange("c", None, A), RowChange("u", A, B), RowChange("d", B, None),
         RowChange("r", None, A), RowChange("m", None, None)],
        ["v"],
    )  # fmt: skip
    assert not batch.reset
    assert [(r["v"], r[SIGN]) for r in batch.rows] == [
        ("a", 1), ("a", -1), ("b", 1), ("b", -1), ("a", 1),
    ]  # fmt: skip


def test_a_truncate_resets_and_drops_what_came_before_it() -> None:
    batch = signed_rows([RowChange("c", None, A), RowChange("t", None, None),
                         RowChange("c", None, B)], ["k", "v"])  # fmt: skip
    assert batch.reset and batch.rows == [{"k": 1, "v": "b", SIGN: 1}]


def test_missing_before_images_come_from_the_look_up() -> None:
    update = RowChange("u", None, B)
    with pytest.raises(ChangeEventError, match="op 'u' needs a before image"):
        signed_rows([update], ["v"])
    batch = signed_rows([update], ["v"], before_of=lambda change: A)
    assert [(r["v"], r[SIGN]) for r in batch.rows] == [("a", -1), ("b", 1)]


def test_missing_and_unavailable_columns_name_the_field() -> None:
    with pytest.raises(ChangeEventError, match=r"field after\.w"):
        signed_rows([RowChange("c", None, A)], ["w"])
    with pytest.raises(ChangeEventError, match=r"unavailable.*field before\.v"):
        signed_rows([RowChange("d", {"k": 1, "v": UNAVAILABLE}, None)], ["v"])


def test_signing_in_sql_over_before_and_after_structs() -> None:
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE changes AS SELECT * FROM (VALUES "
        "('c', NULL, {'k': 1, 'v': 'a'}), ('u', {'k': 1, 'v': 'a'}, {'k': 1, 'v': 'b'}), "
        "('d', {'k': 1, 'v': 'b'}, NULL)) AS t(op, \"before\", \"after\")"
    )
    sql = render(signed_rows_sql("changes", ["k", "v"]), "duckdb")
    assert sorted(con.execute(sql).fetchall()) == [(1, "a", -1), (1, "a", 1), (1, "b", -1),
                                                   (1, "b", 1)]  # fmt: skip
    con.execute("CREATE TABLE src AS SELECT 1 AS k, 'a' AS v")
    snapshot = render(snapshot_signed_sql("src", ["v"]), "duckdb")
    assert con.execute(snapshot).fetchall() == [("a", 1)]
