"""Store factories for the state tests: every contract test runs over each backend."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from cdc.state import StateStore, open_state_store

BACKENDS = ["memory", "rocksdb"]


class StoreFactory:
    """Opens stores of one backend; closes them all when the test ends."""

    def __init__(self, backend: str, root: Path) -> None:
        self.backend = backend
        self.root = root
        self.persistent = backend == "rocksdb"
        self._opened: list[StateStore] = []

    def url(self, name: str = "store") -> str:
        """The URL of the store called ``name`` (a directory under the test's tmp dir)."""
        return "memory://" if self.backend == "memory" else f"rocksdb://{self.root / name}"

    def open(self, name: str = "store") -> StateStore:
        """Open the store ``name`` (again, if persistent: the same data)."""
        store = open_state_store(self.url(name))
        self._opened.append(store)
        return store

    def fresh(self) -> StateStore:
        """A new empty store."""
        return self.open(f"store-{uuid.uuid4().hex[:8]}")

    def close_all(self) -> None:
        for store in self._opened:
            store.close()


@pytest.fixture(params=BACKENDS)
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    """A factory of stores of each backend in turn."""
    factory = StoreFactory(request.param, tmp_path)
    yield factory
    factory.close_all()


@pytest.fixture
def store(stores: StoreFactory) -> StateStore:
    """An empty store of each backend in turn."""
    return stores.open()
