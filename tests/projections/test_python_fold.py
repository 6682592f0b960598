"""Python projections: folds over change events, the rebuilding flag, key moves, truncates."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from cdc.errors import ChangeEventError
from cdc.events import ChangeEvent, Op, ReplicatorSource
from cdc.state.changes import CapturedChange, ChangeKind
from projections import (
    FoldContext,
    ProjectionError,
    PythonProjection,
    PythonProjectionExecutor,
    fold_changes,
)
from projections.change_ops import ChangeLike, Row, RowChange, change_op


def event(op: Op, before: Row | None, after: Row | None, seq: int = 1) -> ChangeEvent:
    source = ReplicatorSource(
        table="payments", processor_id="p", input_topic="in", input_partition=0,
        input_offset_start=seq - 1, input_offset_end=seq, commit_seq=seq,
    )  # fmt: skip
    return ChangeEvent(op=op, before=before, after=after, source=source)


class SpendingAlerts:
    """Total spent per customer; an e-mail when a customer passes 100 (not while rebuilding)."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def fold(self, change: ChangeLike, current: Row | None, ctx: FoldContext) -> Row | None:
        total = current["total"] if current else Decimal(0)
        if change.before is not None and change_op(change) in ("u", "d"):
            total -= change.before["amount"]
        if change.after is not None:
            total += change.after["amount"]
        if current is not None and current["total"] <= 100 < total and not ctx.rebuilding:
            self.sent.append(f"{ctx.key[0]} spent {total}")
        return {"total": total} if total else None


def pay(pid: int, customer: str, amount: str) -> Row:
    return {"id": pid, "customer": customer, "amount": Decimal(amount)}


HISTORY = [
    event(Op.CREATE, None, pay(1, "ann", "60"), 1),
    event(Op.CREATE, None, pay(2, "ann", "50"), 2),
    event(Op.CREATE, None, pay(3, "bob", "10"), 3),
]


def test_the_fold_skips_side_effects_while_rebuilding() -> None:
    alerts = SpendingAlerts()
    projection = PythonProjection("spending", key=["customer"], fold=alerts.fold)
    rows = fold_changes(projection, HISTORY)
    assert rows == {("ann",): {"customer": "ann", "total": Decimal(110)},
                    ("bob",): {"customer": "bob", "total": Decimal(10)}}  # fmt: skip
    assert alerts.sent == []
    live = PythonProjectionExecutor(projection)
    live.apply(HISTORY[:1], rebuilding=True)
    live.apply(HISTORY[1:], rebuilding=False)
    assert alerts.sent == ["ann spent 110"]
    assert live.rows == rows


def test_an_update_moving_a_row_to_another_key_is_a_delete_and_a_create() -> None:
    alerts = SpendingAlerts()
    projection = PythonProjection("spending", key=["customer"], fold=alerts.fold)
    executor = PythonProjectionExecutor(projection)
    executor.apply(HISTORY)
    result = executor.apply([event(Op.UPDATE, pay(3, "bob", "10"), pay(3, "ann", "10"), 4)])
    assert executor.rows == {("ann",): {"customer": "ann", "total": Decimal(120)}}
    assert result.deletes == {("bob",)}
    assert result.upserts == {("ann",): {"customer": "ann", "total": Decimal(120)}}


def test_a_fold_returning_none_deletes_and_a_truncate_clears() -> None:
    projection = PythonProjection("spending", key=["customer"], fold=SpendingAlerts().fold)
    executor = PythonProjectionExecutor(projection)
    executor.apply(HISTORY)
    result = executor.apply([event(Op.DELETE, pay(3, "bob", "10"), None, 4)])
    assert result.deletes == {("bob",)} and not result.upserts
    result = executor.apply([RowChange("t", None, None), RowChange("c", None, pay(4, "cy", "5"))])
    assert result.truncated and executor.rows == {("cy",): {"customer": "cy", "total": 5}}
    audit = PythonProjection("audit", ["customer"], SpendingAlerts().fold, clear_on_truncate=False)
    kept = PythonProjectionExecutor(audit)
    kept.apply([*HISTORY, RowChange("t", None, None)])
    assert len(kept.rows) == 2


def test_captured_changes_fold_too() -> None:
    seen: list[tuple[str, bool]] = []

    def last_op(change: ChangeLike, current: Row | None, ctx: FoldContext) -> Row | None:
        seen.append((change_op(change), ctx.rebuilding))
        return None if change_op(change) == "d" else {"op": change_op(change)}

    projection = PythonProjection("last_op", key=["k"], fold=last_op)
    rows = fold_changes(projection, [
        CapturedChange("t", {"k": 1}, None, {"k": 1}, ChangeKind.CREATE),
        CapturedChange("t", {"k": 1}, {"k": 1}, {"k": 1, "v": 2}, ChangeKind.UPDATE),
        CapturedChange("t", {"k": 2}, None, {"k": 2}, ChangeKind.READ),
    ])  # fmt: skip
    assert rows == {(1,): {"k": 1, "op": "u"}, (2,): {"k": 2, "op": "r"}}
    assert seen == [("c", True), ("u", True), ("r", True)]


def test_a_fold_may_not_change_the_key() -> None:
    def rename(change: ChangeLike, current: Row | None, ctx: FoldContext) -> Row | None:
        return {"customer": "someone else"}

    projection = PythonProjection("bad", key=["customer"], fold=rename)
    with pytest.raises(ProjectionError, match="changed key column customer"):
        fold_changes(projection, HISTORY[:1])


def test_bad_changes_name_the_field() -> None:
    projection = PythonProjection("spending", key=["customer"], fold=SpendingAlerts().fold)
    with pytest.raises(ChangeEventError, match=r"field after\.customer"):
        fold_changes(projection, [RowChange("c", None, {"id": 1})])
    with pytest.raises(ChangeEventError, match=r"needs a before image"):
        fold_changes(projection, [RowChange("d", None, None)])
    with pytest.raises(ProjectionError, match="needs key columns"):
        PythonProjection("nokey", key=[], fold=SpendingAlerts().fold)


def test_messages_and_unknown_objects() -> None:
    projection = PythonProjection("spending", key=["customer"], fold=SpendingAlerts().fold)
    assert fold_changes(projection, [RowChange("m", None, None)]) == {}
    nothing: Any = object()
    with pytest.raises(ChangeEventError, match="has no op"):
        fold_changes(projection, [nothing])
