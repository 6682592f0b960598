"""Opening a state store by URL: ``memory://`` or ``rocksdb:///abs/path[?sync=false]``."""

from __future__ import annotations

import os
from urllib.parse import parse_qs, unquote, urlsplit

from cdc.state.errors import StateStoreError
from cdc.state.memory_store import MemoryStateStore
from cdc.state.protocol import StateStore
from cdc.state.rocks_files import destroy_store_directory

_FLAGS = {"true": True, "1": True, "false": False, "0": False}


def _rocksdb_location(url: str) -> tuple[str, bool]:
    """The path and ``sync`` flag of a ``rocksdb:`` URL."""
    parts = urlsplit(url)
    path = unquote(parts.netloc + parts.path)
    if parts.netloc:  # rocksdb://relative/dir, like local://relative/dir
        path = os.path.abspath(path)
    if not path.startswith("/"):
        raise StateStoreError(
            f"a RocksDB store URL is rocksdb:///absolute/path or rocksdb://relative/path, "
            f"not {url!r}"
        )
    options = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
    unknown = set(options) - {"sync"}
    if unknown or options.get("sync", "true").lower() not in _FLAGS:
        raise StateStoreError(f"the only RocksDB store option is sync=true|false: {url!r}")
    return path.rstrip("/") or "/", _FLAGS[options.get("sync", "true").lower()]


def open_state_store(url: str) -> StateStore:
    """Open (creating if needed) the state store at ``url``.

    ``memory://`` is an empty in-memory store; ``rocksdb:///abs/path`` a RocksDB directory,
    synced at every apply unless ``?sync=false``. Raises ``CorruptStateStoreError`` when the
    directory is damaged or not a state store (``destroy_state_store`` it, then rebuild), and
    ``StateStoreError`` for other problems (bad URL, in use, a directory with other files).
    """
    scheme = urlsplit(url).scheme
    if scheme == "memory":
        return MemoryStateStore(url)
    if scheme == "rocksdb":
        # imported here: importing cdc.state (e.g. for CapturedChange) does not load RocksDB
        from cdc.state.rocks_store import RocksStateStore

        path, sync = _rocksdb_location(url)
        return RocksStateStore(path, sync=sync, url=url)
    raise StateStoreError(f"unknown state store URL {url!r}: use memory:// or rocksdb:///path")


def destroy_state_store(url: str) -> None:
    """Delete the (closed) store at ``url`` so it can be rebuilt; a no-op for ``memory://``.

    Refuses (``StateStoreError``) to delete a directory holding files RocksDB did not make.
    """
    scheme = urlsplit(url).scheme
    if scheme == "rocksdb":
        destroy_store_directory(_rocksdb_location(url)[0])
    elif scheme != "memory":
        raise StateStoreError(f"unknown state store URL {url!r}: use memory:// or rocksdb:///path")
