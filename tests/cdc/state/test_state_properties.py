"""Property: random writes in random commits and aborts leave the store equal to a dict model,
and the captured changes, replayed or restored, rebuild the same state."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cdc.state import (
    CapturedChange,
    ChangeKind,
    StateTable,
    StateTables,
    apply_changelog_batch,
    open_state_store,
)
from cdc.streams.protocol import TopicPartition
from tests.cdc.state.conftest import StoreFactory

CL = TopicPartition("changelog", 0)
PAIRS = StateTable("pairs", {"a": int, "b": str, "v": int}, key=("a", "b"))
SINGLE = StateTable("single", {"k": int, "v": int}, key="k")
TABLES = {t.name: t for t in (PAIRS, SINGLE)}
Model = dict[str, dict[tuple[Any, ...], dict[str, Any]]]

KEYS = {
    "pairs": st.tuples(st.integers(-2, 2), st.sampled_from(["", "x", "x\x00", "y"])),
    "single": st.tuples(st.integers(-300, 300)),
}
OPS = st.one_of(
    st.sampled_from(list(KEYS)).flatmap(
        lambda t: st.tuples(st.just("put"), st.just(t), KEYS[t], st.integers(0, 3))
    ),
    st.sampled_from(list(KEYS)).flatmap(
        lambda t: st.tuples(st.just("delete"), st.just(t), KEYS[t])
    ),
    st.tuples(st.just("clear"), st.sampled_from(list(KEYS))),
)
TRANSACTIONS = st.lists(
    st.tuples(st.lists(OPS, max_size=12), st.sampled_from(["commit", "abort"]), st.booleans()),
    max_size=10,
)


def row(table: str, key: tuple[Any, ...], value: int) -> dict[str, Any]:
    return {**dict(zip(TABLES[table].key, key, strict=True)), "v": value}


def replay(changes: list[CapturedChange], state: Model) -> None:
    for c in changes:
        rows = state.setdefault(c.table, {})
        if c.kind is ChangeKind.TRUNCATE:
            rows.clear()
            continue
        key = tuple(c.key[k] for k in TABLES[c.table].key)
        assert c.before == rows.get(key), c  # the before image is the state before the change
        if c.after is None:
            del rows[key]
        else:
            rows[key] = c.after


def stored(tables: StateTables) -> Model:
    return {
        name: {tuple(r[k] for k in t.key): r for r in tables.view(t).scan()}
        for name, t in TABLES.items()
    }


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(TRANSACTIONS)
def test_store_matches_model(stores: StoreFactory, transactions: list[Any]) -> None:
    store = stores.fresh()
    try:
        tables = StateTables(store, TABLES.values())
        model: Model = {name: {} for name in TABLES}
        replayed: Model = {name: {} for name in TABLES}
        log: list[CapturedChange] = []
        for position, (ops, outcome, apply_after) in enumerate(transactions, start=1):
            draft = {name: dict(rows) for name, rows in model.items()}
            with tables.transaction() as tx:
                for op in ops:
                    table, handle = op[1], tx[op[1]]
                    if op[0] == "put":
                        handle.put(row(table, op[2], op[3]))
                        draft[table][op[2]] = row(table, op[2], op[3])
                    elif op[0] == "delete":
                        handle.delete(op[2])
                        draft[table].pop(op[2], None)
                    else:
                        handle.clear()
                        draft[table].clear()
                    for name in TABLES:  # reads in the transaction see its writes, in key order
                        assert list(tx[name].scan()) == [
                            draft[name][k] for k in sorted(draft[name])
                        ]
                if outcome == "abort":
                    tx.abort()
            if outcome == "commit":
                model = draft
                replay(tx.changes, replayed)
                log.extend(tx.changes)
            assert stored(tables) == model == replayed
            if apply_after:
                tables.apply({CL: position})
        tables.apply({CL: len(transactions) + 1})
        assert stored(tables) == model
        restored = open_state_store("memory://")
        apply_changelog_batch(restored, TABLES.values(), log, {CL: 7})
        for name in TABLES:
            assert list(restored.scan(name)) == list(store.scan(name))
    finally:
        store.close()
