"""SCD type 1/2: the batch executor equals a naive reference written here (every key's changes
sorted by sequence and walked), for random histories with late events, ties, deletes and
truncates; plus the APPLY CHANGES options one by one."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from projections import ScdChange, ScdExecutor, ScdSpec, scd_reference
from projections.change_ops import Row

SPECS = {
    "type1": ScdSpec("t1", ["id"], "seq"),
    "type1_ignore_nulls": ScdSpec("t1n", ["id"], "seq", ignore_null_updates=True),
    "type1_column_list": ScdSpec("t1c", ["id"], "seq", column_list=["name", "seq"]),
    "type1_except": ScdSpec("t1e", ["id"], "seq", except_column_list=["note"]),
    "type2": ScdSpec("t2", ["id"], "seq", stored_as=2),
    "type2_tracked": ScdSpec("t2t", ["id"], "seq", stored_as=2,
                             track_history_column_list=["tier"]),
    "type2_untracked_nulls": ScdSpec("t2u", ["id"], "seq", stored_as=2, ignore_null_updates=True,
                                     track_history_except_column_list=["note", "seq"]),
    "type2_columns": ScdSpec("t2c", ["id"], "seq", stored_as=2, column_list=["tier", "note"],
                             track_history_column_list=["tier"]),
}  # fmt: skip


def naive(spec: ScdSpec, changes: list[ScdChange]) -> list[Row]:
    """The table after ``changes`` (arrival order), computed the slow, obvious way."""
    stamped, high = [], None
    for arrival, change in enumerate(changes):
        sequence = change.sequence if change.sequence is not None else high
        if sequence is None:
            continue
        high = sequence if high is None else max(high, sequence)
        stamped.append((sequence, arrival, change))
    truncates = [(s, a, c) for s, a, c in stamped if c.kind == "truncate"]
    table: list[Row] = []
    for key in {c.key for _, _, c in stamped if c.kind != "truncate"}:
        own = [(s, a, c) for s, a, c in stamped if c.key == key and c.kind != "truncate"]
        history = sorted(own + truncates, key=lambda e: (e[0], e[1]))
        table += walk_type1(spec, history) if spec.stored_as == 1 else walk_type2(spec, history)
    return table


def columns_of(spec: ScdSpec, row: Row) -> Row:
    if spec.column_list is not None:
        return {c: row.get(c) for c in ["id", *spec.column_list]}
    return {c: v for c, v in row.items() if c not in (spec.except_column_list or [])}


def upserted(spec: ScdSpec, current: Row | None, change: ScdChange) -> Row:
    assert change.row is not None
    new = columns_of(spec, change.row)
    if current is not None and spec.ignore_null_updates:
        return {**current, **{c: v for c, v in new.items() if v is not None}}
    return new


def walk_type1(spec: ScdSpec, history: list[tuple[Any, int, ScdChange]]) -> list[Row]:
    row = None
    for _, _, change in history:
        row = None if change.kind != "upsert" else upserted(spec, row, change)
    return [] if row is None else [row]


def walk_type2(spec: ScdSpec, history: list[tuple[Any, int, ScdChange]]) -> list[Row]:
    versions: list[list[Any]] = []  # [row, start, end]
    for sequence, _, change in history:
        current = versions[-1] if versions and versions[-1][2] is None else None
        if change.kind != "upsert":
            if current:
                current[2] = sequence
            continue
        row = upserted(spec, current[0] if current else None, change)
        if current is None:
            versions.append([row, sequence, None])
        elif any(spec.tracked(c) and current[0].get(c) != row.get(c) for c in {*row, *current[0]}):
            current[2] = sequence
            versions.append([row, sequence, None])
        else:
            current[0] = row
    return [{**r, "__start_at": s, "__end_at": e} for r, s, e in versions if s != e]


def ordered(rows: list[Row]) -> list[Row]:
    return sorted(rows, key=lambda r: repr(sorted(r.items())))


_VALUE = st.sampled_from(["a", "b"]) | st.none()
_UPSERT = st.builds(
    lambda key, seq, name, tier, note: ScdChange(
        "upsert", (key,), {"id": key, "name": name, "tier": tier, "note": note, "seq": seq}, seq
    ),
    st.integers(1, 3), st.integers(0, 12), _VALUE, _VALUE, _VALUE,
)  # fmt: skip
_DELETE = st.builds(lambda key, seq: ScdChange("delete", (key,), None, seq),
                    st.integers(1, 3), st.integers(0, 12))  # fmt: skip
_TRUNCATE = st.builds(lambda seq: ScdChange("truncate", sequence=seq),
                      st.none() | st.integers(0, 12))  # fmt: skip
HISTORIES = st.lists(st.one_of(_UPSERT, _UPSERT, _UPSERT, _DELETE, _TRUNCATE), max_size=30)


@pytest.mark.parametrize("name", sorted(SPECS))
@settings(max_examples=150, deadline=None)
@given(changes=HISTORIES, cuts=st.lists(st.integers(0, 30), max_size=5))
def test_batches_equal_the_naive_reference(
    name: str, changes: list[ScdChange], cuts: list[int]
) -> None:
    spec = SPECS[name]
    executor, replica = ScdExecutor(spec), dict[tuple[Any, ...], Row]()
    bounds = [0, *sorted(cuts), len(changes)]
    for start, stop in itertools.pairwise(bounds):
        delta = executor.apply(changes[start:stop])
        for identity in delta.deletes:
            del replica[identity]
        for row in delta.upserts:
            replica[executor.logic.identity(row)] = row
        seen = changes[:stop]
        assert ordered(executor.rows()) == ordered(naive(spec, seen))
    assert ordered(list(replica.values())) == ordered(executor.rows())
    assert ordered(scd_reference(spec, changes)) == ordered(naive(spec, changes))


def up(key: int, seq: int, **row: Any) -> ScdChange:
    return ScdChange("upsert", (key,), {"id": key, **row}, seq)


def down(key: int, seq: int) -> ScdChange:
    return ScdChange("delete", (key,), None, seq)


def history(spec: ScdSpec, *batches: list[ScdChange]) -> list[tuple[Any, ...]]:
    executor = ScdExecutor(spec)
    for batch in batches:
        executor.apply(batch)
    return sorted((r["id"], r.get("tier"), r["__start_at"], r["__end_at"]) for r in executor.rows())


def test_a_late_event_is_inserted_into_the_history() -> None:
    spec = SPECS["type2"]
    got = history(spec, [up(1, 1, tier="a"), up(1, 3, tier="c")], [up(1, 2, tier="b")])
    assert got == [(1, "a", 1, 2), (1, "b", 2, 3), (1, "c", 3, None)]


def test_a_deleted_key_is_not_resurrected_by_a_late_upsert() -> None:
    t1 = ScdExecutor(SPECS["type1"])
    t1.apply([up(1, 1, name="x"), down(1, 5)])
    assert t1.apply([up(1, 3, name="late")]).upserts == [] and t1.rows() == []
    assert t1.remembered_keys == 1  # the tombstone
    assert t1.apply([up(1, 6, name="back")]).upserts == [{"id": 1, "name": "back"}]
    got = history(SPECS["type2"], [up(1, 1, tier="a"), down(1, 5)], [up(1, 3, tier="b")])
    assert got == [(1, "a", 1, 3), (1, "b", 3, 5)]


def test_untracked_changes_update_the_current_version_in_place() -> None:
    executor = ScdExecutor(SPECS["type2_tracked"])
    executor.apply([up(1, 1, tier="a", note="x"), up(1, 2, tier="a", note="y")])
    assert executor.rows() == [{"id": 1, "tier": "a", "note": "y", "__start_at": 1,
                                "__end_at": None}]  # fmt: skip
    delta = executor.apply([up(1, 3, tier="b", note="y")])
    assert sorted(delta.upserts, key=lambda r: r["__start_at"]) == [
        {"id": 1, "tier": "a", "note": "y", "__start_at": 1, "__end_at": 3},
        {"id": 1, "tier": "b", "note": "y", "__start_at": 3, "__end_at": None},
    ]


def test_ignore_null_updates_keeps_values() -> None:
    executor = ScdExecutor(SPECS["type1_ignore_nulls"])
    executor.apply([up(1, 1, name="ann", tier="gold"), up(1, 2, name=None, tier="silver")])
    assert executor.rows() == [{"id": 1, "name": "ann", "tier": "silver"}]
    executor.apply([down(1, 3), up(1, 4, name=None, tier="new")])
    assert executor.rows() == [{"id": 1, "name": None, "tier": "new"}]


def test_a_truncate_deletes_everything_before_it() -> None:
    t1 = ScdExecutor(SPECS["type1"])
    t1.apply([up(1, 1, name="a"), up(2, 4, name="b")])
    delta = t1.apply([ScdChange("truncate"), up(3, 2, name="late"), up(3, 4, name="tie")])
    assert sorted(delta.deletes) == [(1,), (2,)]
    assert t1.rows() == [{"id": 3, "name": "tie"}] and t1.remembered_keys == 1
    got = history(SPECS["type2"], [up(1, 1, tier="a"), ScdChange("truncate", sequence=3)],
                  [up(1, 2, tier="b"), up(2, 5, tier="c")])  # fmt: skip
    assert got == [(1, "a", 1, 2), (1, "b", 2, 3), (2, "c", 5, None)]


def test_type2_deletes_identify_versions_by_start() -> None:
    executor = ScdExecutor(SPECS["type2"])
    executor.apply([up(1, 1, tier="a"), up(1, 4, tier="b")])
    delta = executor.apply([up(1, 4, tier="a")])  # a tie: same sequence, arrived later
    assert delta.deletes == []  # [1, 4) 'a' stays; 'b' is now a zero-length version, dropped
    assert {(r["tier"], r["__start_at"], r["__end_at"]) for r in executor.rows()} == {
        ("a", 1, 4),
        ("a", 4, None),
    }
