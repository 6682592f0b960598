"""State transactions over every backend: isolation, abort, change capture and collapse."""

from __future__ import annotations

from decimal import Decimal

import pytest

from cdc.state import (
    CapturedChange,
    ChangeKind,
    StateStore,
    StateTable,
    StateTables,
    StateTransactionError,
)
from cdc.streams.protocol import TopicPartition

CL = TopicPartition("changelog", 0)
ACCOUNTS = StateTable("accounts", {"id": int, "owner": str, "balance": Decimal}, key="id")
LINES = StateTable("lines", {"order": int, "sku": str, "qty": int}, key=("order", "sku"))


@pytest.fixture
def tables(store: StateStore) -> StateTables:
    tables = StateTables(store, [ACCOUNTS, LINES])
    with tables.transaction() as tx:
        tx[ACCOUNTS].put({"id": 1, "owner": "ann", "balance": Decimal("10.00")})
        tx[ACCOUNTS].put({"id": 2, "owner": "bob", "balance": Decimal("0")})
    tables.apply({CL: 1})
    return tables


def acct(id_: int, owner: str, balance: str) -> dict[str, object]:
    return {"id": id_, "owner": owner, "balance": Decimal(balance)}


def test_reads_see_own_writes_and_nothing_leaks(tables: StateTables) -> None:
    with tables.transaction() as tx:
        accounts = tx[ACCOUNTS]
        accounts.put(acct(3, "cy", "1"))
        accounts.delete(1)
        accounts.put(acct(2, "bob", "5"))
        assert accounts.get(3) == acct(3, "cy", "1")
        assert accounts.get({"id": 1}) is None
        assert [r["id"] for r in accounts.scan()] == [2, 3]
        assert tables.view(ACCOUNTS).get(3) is None  # other readers: committed state only
        assert [r["id"] for r in tables.view("accounts").scan()] == [1, 2]
    assert tables.view(ACCOUNTS).get(3) == acct(3, "cy", "1")
    assert tables.store.get("accounts", ACCOUNTS.encode_key(3)) is None  # not applied yet
    tables.apply({CL: 2})
    assert tables.store.get("accounts", ACCOUNTS.encode_key(3)) is not None
    assert tables.store.get("accounts", ACCOUNTS.encode_key(1)) is None
    assert tables.store.checkpoint() == {CL: 2}


def test_abort_forgets_everything(tables: StateTables) -> None:
    with pytest.raises(RuntimeError, match="boom"), tables.transaction() as tx:
        tx[ACCOUNTS].put(acct(9, "zed", "9"))
        tx[LINES].clear()
        raise RuntimeError("boom")
    assert tx.changes == []
    with pytest.raises(StateTransactionError, match="aborted"):
        tx[ACCOUNTS].get(9)
    assert tables.view(ACCOUNTS).get(9) is None
    assert tables.pending_writes == {} and tables.pending_truncated == frozenset()
    with tables.transaction() as tx2:
        tx2[ACCOUNTS].put(acct(9, "zed", "9"))
        tx2.abort()
    assert tables.view(ACCOUNTS).get(9) is None


def test_one_transaction_at_a_time(tables: StateTables) -> None:
    with tables.transaction(), pytest.raises(StateTransactionError, match="already open"):
        tables.begin()
    tx = tables.begin()
    tx.commit()
    with pytest.raises(StateTransactionError, match="committed"):
        tx.commit()


def test_several_writes_of_a_key_collapse_into_one_change(tables: StateTables) -> None:
    with tables.transaction() as tx:
        a = tx[ACCOUNTS]
        a.put(acct(1, "ann", "11"))
        a.put(acct(1, "ann", "12"))  # update: before is the committed row, after the last
        a.put(acct(7, "new", "1"))
        a.delete(7)  # a new key put then deleted: nothing
        a.delete(2)
        a.put(acct(2, "bob", "0"))  # deleted then put back as it was: nothing
        a.put(acct(8, "eve", "3"))
        a.delete(8)
        a.put(acct(8, "eve", "4"))  # create with the final image
    assert tx.changes == [
        CapturedChange(
            "accounts", {"id": 1}, acct(1, "ann", "10.00"), acct(1, "ann", "12"), ChangeKind.UPDATE
        ),
        CapturedChange("accounts", {"id": 8}, None, acct(8, "eve", "4"), ChangeKind.CREATE),
    ]
    with tables.transaction() as tx:
        tx[ACCOUNTS].put(acct(8, "eve", "5"))
        tx[ACCOUNTS].delete(8)
    assert tx.changes == [
        CapturedChange("accounts", {"id": 8}, acct(8, "eve", "4"), None, ChangeKind.DELETE)
    ]


def test_clear_is_one_truncate_then_the_rows_written_after_it(tables: StateTables) -> None:
    with tables.transaction() as tx:
        tx[ACCOUNTS].put(acct(5, "lost", "1"))
        tx[ACCOUNTS].clear()
        assert tx[ACCOUNTS].get(1) is None and list(tx[ACCOUNTS].scan()) == []
        tx[ACCOUNTS].put(acct(1, "ann", "10.00"))  # same row as before the clear: a create
        tx[ACCOUNTS].clear()
        tx[ACCOUNTS].put(acct(2, "bob", "1"))
        tx[LINES].put({"order": 1, "sku": "x", "qty": 2})
    assert tx.changes == [
        CapturedChange("accounts", {}, None, None, ChangeKind.TRUNCATE),
        CapturedChange("accounts", {"id": 2}, None, acct(2, "bob", "1"), ChangeKind.CREATE),
        CapturedChange(
            "lines",
            {"order": 1, "sku": "x"},
            None,
            {"order": 1, "sku": "x", "qty": 2},
            ChangeKind.CREATE,
        ),
    ]
    assert tx.truncated == frozenset({"accounts"})
    tables.apply({CL: 2})
    assert [r["id"] for r in tables.view(ACCOUNTS).scan()] == [2]


def test_transactions_share_one_apply(tables: StateTables) -> None:
    with tables.transaction() as tx1:
        tx1[ACCOUNTS].put(acct(3, "cy", "1"))
    assert tables.pending_writes == tx1.writes  # one transaction: apply(tx.writes, ...)
    with tables.transaction() as tx2:
        assert tx2[ACCOUNTS].get(3) == acct(3, "cy", "1")  # sees the committed, unapplied tx1
        tx2[ACCOUNTS].put(acct(3, "cy", "2"))
        tx2[ACCOUNTS].clear()
        tx2[ACCOUNTS].put(acct(4, "di", "1"))
    assert tx2.changes[0].kind is ChangeKind.TRUNCATE
    assert tables.pending_truncated == frozenset({"accounts"})
    tables.apply({CL: 3})
    assert tables.pending_writes == {}
    assert [r["id"] for r in tables.view(ACCOUNTS).scan()] == [4]
    assert tables.store.checkpoint() == {CL: 3}


def test_discard_drops_committed_unapplied_transactions(tables: StateTables) -> None:
    with tables.transaction() as tx:
        tx[ACCOUNTS].delete(1)
    assert tables.view(ACCOUNTS).get(1) is None
    tables.discard()  # the changelog commit failed
    assert tables.view(ACCOUNTS).get(1) == acct(1, "ann", "10.00")
    with tables.transaction(), pytest.raises(StateTransactionError):
        tables.discard()


def test_snapshot_yields_every_committed_row_as_a_read(tables: StateTables) -> None:
    with tables.transaction() as tx:
        tx[LINES].put({"order": 2, "sku": "b", "qty": 1})
        tx[LINES].put({"order": 2, "sku": "a", "qty": None})
    reads = list(tables.snapshot())
    assert [(c.table, c.key, c.kind) for c in reads] == [
        ("accounts", {"id": 1}, ChangeKind.READ),
        ("accounts", {"id": 2}, ChangeKind.READ),
        ("lines", {"order": 2, "sku": "a"}, ChangeKind.READ),
        ("lines", {"order": 2, "sku": "b"}, ChangeKind.READ),
    ]
    assert reads[2].after == {"order": 2, "sku": "a", "qty": None} and reads[2].before is None
    assert [c.key for c in tables.snapshot("lines")] == [c.key for c in reads[2:]]


def test_composite_keys_scan_in_tuple_order(tables: StateTables) -> None:
    keys = [(-300, "b"), (-1, ""), (0, "a\x00"), (0, "a"), (2, "é"), (2, "z"), (70000, "a")]
    with tables.transaction() as tx:
        for order, sku in reversed(keys):
            tx[LINES].put({"order": order, "sku": sku, "qty": 1})
    got = [(r["order"], r["sku"]) for r in tables.view(LINES).scan()]
    assert got == sorted(keys)
    assert tables.view(LINES).get((0, "a\x00")) is not None


def test_unknown_table_is_a_key_error(tables: StateTables) -> None:
    with tables.transaction() as tx, pytest.raises(KeyError, match="nope"):
        tx.table("nope")
    with pytest.raises(ValueError, match="twice"):
        StateTables(tables.store, [ACCOUNTS, ACCOUNTS])


def test_preview_shows_the_changes_without_ending_the_transaction(tables: StateTables) -> None:
    tx = tables.begin()
    tx[ACCOUNTS].put(acct(1, "ann", "11"))
    first = tx.preview()
    assert [c.kind for c in first] == [ChangeKind.UPDATE]
    assert tables.view(ACCOUNTS).get(1) == acct(1, "ann", "10.00")  # still not committed
    tx[ACCOUNTS].delete(2)  # a later write changes the preview
    preview = tx.preview()
    assert [c.kind for c in preview] == [ChangeKind.UPDATE, ChangeKind.DELETE]
    assert tx.commit() == preview
    tx2 = tables.begin()
    tx2[ACCOUNTS].put(acct(5, "x", "1"))
    assert len(tx2.preview()) == 1
    tx2.abort()  # the changelog encoding failed: nothing happened
    assert tables.view(ACCOUNTS).get(5) is None
