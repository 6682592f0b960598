"""SCD changes from change events (sequence column or source position), and spec validation."""

from __future__ import annotations

from typing import Any

import pytest

from cdc.errors import ChangeEventError
from cdc.events import UNAVAILABLE, ChangeEvent, Op, ReplicatorSource
from projections import ProjectionError, ScdChange, ScdExecutor, ScdSpec, scd_changes
from projections.change_ops import RowChange


def event(op: Op, before: Any, after: Any, commit: int) -> ChangeEvent:
    source = ReplicatorSource(
        table="customers", processor_id="p", input_topic="in", input_partition=0,
        input_offset_start=commit, input_offset_end=commit + 1, commit_seq=commit,
    )  # fmt: skip
    return ChangeEvent(op=op, before=before, after=after, source=source)


def test_changes_sequenced_by_a_column() -> None:
    spec = ScdSpec("c", ["id"], "ts")
    a, b = {"id": 1, "ts": 10, "v": "a"}, {"id": 2, "ts": 11, "v": "b"}
    changes = scd_changes(spec, [
        RowChange("c", None, a), RowChange("u", a, b), RowChange("d", b, None),
        RowChange("t", None, None), RowChange("m", None, None),
    ])  # fmt: skip
    assert changes == [
        ScdChange("upsert", (1,), a, 10),
        ScdChange("delete", (1,), None, 11),  # the key changed: the old key is deleted
        ScdChange("upsert", (2,), b, 11),
        ScdChange("delete", (2,), None, 11),
        ScdChange("truncate"),
    ]
    with pytest.raises(ChangeEventError, match=r"field before\.ts"):
        scd_changes(spec, [RowChange("d", {"id": 1}, None)])
    assert scd_changes(spec, [RowChange("d", {"id": 1}, None)], sequence_of=lambda c: 7) == [
        ScdChange("delete", (1,), None, 7)
    ]


def test_changes_sequenced_by_source_position() -> None:
    spec = ScdSpec("c", ["id"], stored_as=2)
    events = [
        event(Op.CREATE, None, {"id": 1, "v": "b"}, 2),
        event(Op.CREATE, None, {"id": 1, "v": "a"}, 1),  # arrives late
    ]
    executor = ScdExecutor(spec)
    executor.apply(scd_changes(spec, events))
    rows = sorted(executor.rows(), key=lambda r: r["__start_at"])
    assert [r["v"] for r in rows] == ["a", "b"]
    assert rows[0]["__end_at"] == rows[1]["__start_at"] == events[0].position()
    with pytest.raises(ChangeEventError, match="no source position"):
        scd_changes(spec, [RowChange("c", None, {"id": 1})])


def test_unavailable_values_keep_the_previous_value() -> None:
    spec = ScdSpec("c", ["id"], "ts")
    executor = ScdExecutor(spec)
    executor.apply(scd_changes(spec, [
        RowChange("c", None, {"id": 1, "ts": 1, "doc": "long text"}),
        RowChange("u", None, {"id": 1, "ts": 2, "doc": UNAVAILABLE}),
    ]))  # fmt: skip
    assert executor.rows() == [{"id": 1, "ts": 2, "doc": "long text"}]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"keys": []}, "needs keys"),
        ({"keys": "id"}, "list of column names"),
        ({"stored_as": 3}, "stored_as is 1 or 2"),
        ({"column_list": ["a"], "except_column_list": ["b"]}, "not both"),
        ({"stored_as": 2, "track_history_column_list": ["a"],
          "track_history_except_column_list": ["b"]}, "not both"),
        ({"track_history_column_list": ["a"]}, "needs stored_as=2"),
        ({"except_column_list": ["id"]}, "cannot drop a key"),
        ({"stored_as": 2, "column_list": ["a"], "track_history_column_list": ["b"]},
         "not in column_list"),
        ({"column_list": ["__start_at"]}, "reserved"),
    ],
)  # fmt: skip
def test_invalid_specs_say_why(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ProjectionError, match=message):
        ScdSpec(**{"name": "s", "keys": ["id"], **options})
