"""The ``StateStore`` contract, checked over every backend (memory and RocksDB)."""

from __future__ import annotations

import random

import pytest

from cdc.state import StateStore, StateStoreError
from cdc.streams.protocol import TopicPartition
from tests.cdc.state.conftest import StoreFactory

CL = TopicPartition("changelog", 0)


def test_get_put_delete(store: StateStore) -> None:
    assert store.get("t", b"k") is None
    store.apply({"t": {b"k": b"v1", b"j": b"w"}}, {CL: 1})
    assert store.get("t", b"k") == b"v1"
    store.apply({"t": {b"k": b"v2", b"j": None}}, {CL: 2})
    assert store.get("t", b"k") == b"v2"
    assert store.get("t", b"j") is None
    store.apply({"t": {b"never-there": None}}, {CL: 3})
    assert list(store.scan("t")) == [(b"k", b"v2")]


def test_scan_is_in_key_order(store: StateStore) -> None:
    rng = random.Random(7)
    rows = {rng.randbytes(rng.randint(0, 12)): rng.randbytes(5) for _ in range(500)}
    rows[b""] = b"empty key"
    rows[b"\xff\xff"] = b"high key"
    store.apply({"t": rows}, {CL: 1})
    assert list(store.scan("t")) == sorted(rows.items())
    assert list(store.scan("absent")) == []


def test_tables_do_not_see_each_other(store: StateStore) -> None:
    names = ["a", "ab", "b", "a\x00", "é", "a" * 255]
    store.apply({n: {b"k": n.encode(), n.encode(): b"own"} for n in names}, {CL: 1})
    for n in names:
        assert store.get(n, b"k") == n.encode()
        assert list(store.scan(n)) == sorted([(b"k", n.encode()), (n.encode(), b"own")])


def test_truncate_clears_before_the_writes_of_the_same_apply(store: StateStore) -> None:
    store.apply({"t": {b"1": b"a", b"2": b"b"}, "u": {b"1": b"x"}}, {CL: 1})
    store.apply({"t": {b"2": b"new", b"3": b"c"}}, {CL: 2}, frozenset({"t"}))
    assert list(store.scan("t")) == [(b"2", b"new"), (b"3", b"c")]
    assert list(store.scan("u")) == [(b"1", b"x")]
    store.apply({}, {CL: 3}, frozenset({"t", "u", "never-written"}))
    assert list(store.scan("t")) == list(store.scan("u")) == []
    assert store.checkpoint() == {CL: 3}


def test_checkpoint_round_trip_and_merge(stores: StoreFactory) -> None:
    store = stores.open()
    assert store.checkpoint() == {}
    other = TopicPartition("other-topic", 11)
    store.apply({}, {CL: 5, other: 2**62})
    store.apply({"t": {b"k": b"v"}}, {CL: 9})  # partitions not named keep their position
    assert store.checkpoint() == {CL: 9, other: 2**62}
    assert all(type(tp) is TopicPartition for tp in store.checkpoint())
    if stores.persistent:
        store.close()
        reopened = stores.open()
        assert reopened.checkpoint() == {CL: 9, other: 2**62}
        assert reopened.get("t", b"k") == b"v"


def test_wipe_drops_tables_and_checkpoint(stores: StoreFactory) -> None:
    store = stores.open()
    store.apply({"t": {b"k": b"v"}, "u": {b"k": b"v"}}, {CL: 4})
    store.wipe()
    assert store.checkpoint() == {}
    assert list(store.scan("t")) == list(store.scan("u")) == []
    store.apply({"t": {b"k2": b"v2"}}, {CL: 1})
    assert list(store.scan("t")) == [(b"k2", b"v2")]
    if stores.persistent:
        store.close()
        assert stores.open().checkpoint() == {CL: 1}


def test_bad_apply_changes_nothing(store: StateStore) -> None:
    store.apply({"t": {b"k": b"v"}}, {CL: 1})
    with pytest.raises((TypeError, ValueError)):
        store.apply({"t": {b"k": b"new", b"j": "not bytes"}}, {CL: 2})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="non-negative"):
        store.apply({"t": {b"k": b"new"}}, {CL: 2, TopicPartition("x", 0): -1})
    assert list(store.scan("t")) == [(b"k", b"v")]
    assert store.checkpoint() == {CL: 1}


def test_scan_sees_the_store_as_of_the_call(store: StateStore) -> None:
    store.apply({"t": {b"1": b"a", b"2": b"b"}}, {CL: 1})
    rows = store.scan("t")
    store.apply({"t": {b"1": None, b"3": b"c"}}, {CL: 2}, frozenset({"t"}))
    assert list(rows) == [(b"1", b"a"), (b"2", b"b")]


def test_closed_store_refuses_use(store: StateStore) -> None:
    store.close()
    store.close()  # idempotent
    with pytest.raises(StateStoreError, match="closed"):
        store.get("t", b"k")
    with pytest.raises(StateStoreError, match="closed"):
        store.apply({}, {CL: 1})
