"""The persistent state store (``rocksdb:///abs/path``): RocksDB on local disk, via rocksdict.

Layout of the one key space: ``\\x00format`` holds the store marker; ``\\x00cp\\x00`` + topic
length (2 bytes) + topic + partition (4 bytes) holds a checkpoint offset (8 bytes); table rows
live at ``\\x01`` + name length (1 byte) + name + key, so a table is one key range and a
truncate is a range delete in the same write batch as the rest of ``apply``.

Durability: every ``apply`` is one WriteBatch written with ``sync`` (WAL fsync) by default. An
apply comes once per changelog commit, so the fsync is paid per transaction batch, not per key,
and a store that returned from ``apply`` keeps it through a power loss. WAL recovery is
point-in-time, so a torn or corrupt WAL tail leaves the store at an earlier checkpoint, which
restore then replays the changelog from (``?sync=false`` relies on exactly that).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from typing import ParamSpec, TypeVar

import rocksdict

from cdc.state.errors import CorruptStateStoreError, StateStoreError, store_error
from cdc.state.protocol import TableWrites
from cdc.state.rocks_files import check_store_directory, destroy_store_directory
from cdc.streams.protocol import TopicPartition

FORMAT_KEY = b"\x00format"
FORMAT = b"cdc-state-store/1"
_CHECKPOINTS = b"\x00cp\x00"
_CHECKPOINTS_END = b"\x00cp\x01"
_TABLES, _TABLES_END = b"\x01", b"\x02"
_CACHE_BYTES = 64 << 20
_P = ParamSpec("_P")
_T = TypeVar("_T")


def _options() -> rocksdict.Options:
    options = rocksdict.Options(raw_mode=True)
    options.create_if_missing(True)
    options.set_paranoid_checks(True)
    options.set_wal_recovery_mode(rocksdict.DBRecoveryMode.point_in_time())
    options.set_compression_type(rocksdict.DBCompressionType.lz4())
    options.set_keep_log_file_num(4)
    table = rocksdict.BlockBasedOptions()
    table.set_bloom_filter(10, False)  # point gets of absent keys skip most SST files
    table.set_block_cache(rocksdict.Cache(_CACHE_BYTES))
    # Index and filter blocks stay out of the cache (their memory grows with the data, ~1-2 %):
    # in a cache smaller than the data, reads evict and reload a whole SST's index and filter
    # (a point get 110-230 us against 3 us, 650 k keys in one 47 MB file).
    options.set_block_based_table_factory(table)
    return options


@functools.lru_cache(maxsize=1024)
def table_prefix(table: str) -> bytes:
    """The key prefix of ``table``'s rows."""
    name = table.encode("utf-8")
    if not 0 < len(name) < 256:
        raise ValueError(f"a state table name is 1-255 UTF-8 bytes: {table!r}")
    return _TABLES + bytes([len(name)]) + name


def _prefix_end(prefix: bytes) -> bytes:
    """The smallest key above every key starting with ``prefix``."""
    stripped = prefix.rstrip(b"\xff")
    return stripped[:-1] + bytes([stripped[-1] + 1])


def _checkpoint_key(tp: TopicPartition) -> bytes:
    topic = tp.topic.encode("utf-8")
    return _CHECKPOINTS + len(topic).to_bytes(2, "big") + topic + tp.partition.to_bytes(4, "big")


class RocksStateStore:
    """A ``StateStore`` in a RocksDB directory; raises ``CorruptStateStoreError`` on open or on
    read when the directory is corrupt or holds another RocksDB (destroy it, then rebuild).

    ``apply`` merges the checkpoint: partitions it does not name keep their position.
    """

    def __init__(self, path: str, *, sync: bool = True, url: str | None = None) -> None:
        self.path = path
        self.url = url or f"rocksdb://{path}"
        self._write_options = rocksdict.WriteOptions()
        self._write_options.sync = sync
        self._db: rocksdict.Rdict | None = self._open()

    def _open(self) -> rocksdict.Rdict:
        check_store_directory(self.path)
        try:
            db = rocksdict.Rdict(self.path, _options())
        except Exception as exc:
            raise store_error(self.path, exc, opening=True) from exc
        try:
            self._check_format(db)
        except BaseException:
            db.close()
            raise
        return db

    def _check_format(self, db: rocksdict.Rdict) -> None:
        marker = self._call(db.get, FORMAT_KEY)
        if marker == FORMAT:
            return
        if marker is not None:
            raise CorruptStateStoreError(self.path, f"store format {marker!r}, not {FORMAT!r}")
        it = self._call(db.iter)
        it.seek_to_first()
        empty = not it.valid()
        del it  # a live iterator keeps the database (and its lock) open
        if not empty:
            raise CorruptStateStoreError(self.path, "a RocksDB database without the store marker")
        self._call(db.put, FORMAT_KEY, FORMAT, self._write_options)

    def get(self, table: str, key: bytes) -> bytes | None:
        """The value at ``key`` in ``table``, or None."""
        db, where = self._live(), table_prefix(table) + key
        try:  # inlined ``_call``: this is the processor's per-event read
            value: bytes | None = db.get(where)
        except Exception as exc:
            raise self._error(exc) from exc
        return value

    def scan(self, table: str) -> Iterator[tuple[bytes, bytes]]:
        """All rows of ``table`` in key order, as of this call (a RocksDB iterator snapshot)."""
        prefix = table_prefix(table)
        return self._range(prefix, _prefix_end(prefix))

    def apply(
        self,
        writes: TableWrites,
        checkpoint: Mapping[TopicPartition, int],
        truncated: frozenset[str] = frozenset(),
    ) -> None:
        """Clear ``truncated``, apply ``writes``, and record ``checkpoint`` in one WriteBatch."""
        batch = rocksdict.WriteBatch(raw_mode=True)
        for table in truncated:
            prefix = table_prefix(table)
            batch.delete_range(prefix, _prefix_end(prefix))
        for table, rows in writes.items():
            prefix = table_prefix(table)
            for key, value in rows.items():
                if value is None:
                    batch.delete(prefix + key)
                else:
                    batch.put(prefix + key, value)
        for tp, offset in checkpoint.items():
            if not isinstance(offset, int) or offset < 0:
                raise ValueError(f"a checkpoint offset is a non-negative int, not {offset!r}")
            batch.put(_checkpoint_key(tp), offset.to_bytes(8, "big"))
        self._call(self._live().write, batch, self._write_options)

    def checkpoint(self) -> dict[TopicPartition, int]:
        """Next changelog offset to apply, per partition."""
        positions: dict[TopicPartition, int] = {}
        for key, value in self._range(_CHECKPOINTS, _CHECKPOINTS_END):
            size = int.from_bytes(key[:2], "big")
            topic = key[2 : 2 + size].decode("utf-8")
            positions[TopicPartition(topic, int.from_bytes(key[2 + size :], "big"))] = (
                int.from_bytes(value, "big")
            )
        return positions

    def wipe(self) -> None:
        """Drop all tables and the checkpoint: the directory is destroyed and made anew."""
        self._live().close()
        self._db = None
        destroy_store_directory(self.path)
        self._db = self._open()

    def close(self) -> None:
        """Close the database (idempotent); scans still running keep it open until they end."""
        if self._db is not None:
            self._db.close()
            self._db = None

    def _live(self) -> rocksdict.Rdict:
        if self._db is None:
            raise StateStoreError(f"state store {self.url} is closed")
        return self._db

    def _range(self, lower: bytes, upper: bytes) -> Iterator[tuple[bytes, bytes]]:
        # No ReadOptions iterate bounds: rocksdict encodes them as python objects, not raw bytes.
        it = self._call(self._live().iter)
        self._call(it.seek, lower)
        return self._iterate(it, len(lower), upper)

    def _iterate(
        self, it: rocksdict.RdictIter, cut: int, upper: bytes
    ) -> Iterator[tuple[bytes, bytes]]:
        try:
            while it.valid():
                key = it.key()
                if key >= upper:
                    return
                yield key[cut:], it.value()
                it.next()
            it.status()  # an iterator stops early on corruption: only status() tells
        except Exception as exc:
            raise self._error(exc) from exc

    def _call(self, fn: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            raise self._error(exc) from exc

    def _error(self, exc: Exception) -> StateStoreError:
        return store_error(self.path, exc)
