"""Restoring a store from changelog changes, over every backend."""

from __future__ import annotations

import pytest

from cdc.errors import ChangeEventError
from cdc.state import CapturedChange, ChangeKind, StateStore, StateTable, StateTables
from cdc.state import apply_changelog_batch as restore
from cdc.streams.protocol import TopicPartition

CL = TopicPartition("changelog", 3)
ITEMS = StateTable("items", {"id": int, "name": str}, key="id")
K = ChangeKind


def change(kind: ChangeKind, id_: int | None = None, name: str | None = None) -> CapturedChange:
    key = {} if id_ is None else {"id": id_}
    after = None if name is None else {"id": id_, "name": name}
    return CapturedChange("items", key, None, after, kind)


def names(store: StateStore) -> dict[int, str]:
    view = StateTables(store, [ITEMS]).view(ITEMS)
    return {r["id"]: r["name"] for r in view.scan()}


def test_changes_apply_in_order_with_the_checkpoint(store: StateStore) -> None:
    restore(store, [ITEMS], [change(K.CREATE, 1, "a"), change(K.READ, 2, "b")], {CL: 2})
    assert names(store) == {1: "a", 2: "b"} and store.checkpoint() == {CL: 2}
    batch = [
        change(K.UPDATE, 1, "a2"),
        change(K.CREATE, 3, "gone"),
        change(K.TRUNCATE),  # drops what came before it in the batch too
        change(K.CREATE, 4, "d"),
        change(K.CREATE, 5, "e"),
        change(K.DELETE, 5),
    ]
    restore(store, [ITEMS], batch, {CL: 8})
    assert names(store) == {4: "d"} and store.checkpoint() == {CL: 8}


def test_delete_may_name_its_key_by_the_before_image(store: StateStore) -> None:
    restore(store, [ITEMS], [change(K.CREATE, 1, "a")], {CL: 1})
    gone = CapturedChange("items", {}, {"id": 1, "name": "a"}, None, K.DELETE)
    restore(store, [ITEMS], [gone], {CL: 2})
    assert names(store) == {}


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        (CapturedChange("nope", {"id": 1}, None, {"id": 1}, K.CREATE), "table"),
        (CapturedChange("items", {"id": 1}, None, None, K.UPDATE), "after"),
        (CapturedChange("items", {}, None, None, K.DELETE), "key"),
        (CapturedChange("items", {"id": 1}, None, {"id": 1, "name": 5}, K.CREATE), "name"),
    ],
)
def test_a_bad_change_applies_nothing(store: StateStore, bad: CapturedChange, field: str) -> None:
    with pytest.raises(ChangeEventError) as info:
        restore(store, [ITEMS], [change(K.CREATE, 9, "ok"), bad], {CL: 5})
    assert info.value.field == field
    assert names(store) == {} and store.checkpoint() == {}
