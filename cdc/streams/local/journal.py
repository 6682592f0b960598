"""The commit journal: the single source of truth of what is committed in a local log.

``journal.log`` is a sequence of frames ``u32 length, u32 crc32(payload), payload`` whose
payload is a JSON record:

* ``{"t": "topic", "name", "partitions", "compacted"}``: a topic exists;
* ``{"t": "init", "id", "epoch"}``: a writer with transactional id ``id`` took ``epoch``;
* ``{"t": "commit", "id", "epoch", "parts": [[topic, partition, end, segment_base,
  segment_bytes, max_timestamp]], "groups": [[group, topic, partition, position]]}``: a
  transaction committed (appending this frame is the commit point);
* ``{"t": "snapshot", ...}``: the whole state, first record after the journal is rotated.

Appends happen under ``journal.lock`` and are fsynced. A partial or damaged frame ends the
journal: the next appender truncates it (a torn tail of a crashed appender) before appending.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import struct
import threading
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from cdc.streams.local.errors import CorruptLogError
from cdc.streams.local.locks import FileLock
from cdc.streams.local.segments import fsync_directory
from cdc.streams.local.settings import TOPICS_DIR
from cdc.streams.protocol import TopicPartition

JOURNAL_FILE = "journal.log"
JOURNAL_LOCK = "journal.lock"
_FRAME = struct.Struct("<II")
_log = logging.getLogger(__name__)
_MAX_RECORD_BYTES = 1 << 30


@dataclass(frozen=True, slots=True)
class PartitionState:
    """A partition's committed end and where it lies in the active (last committed) segment."""

    end: int = 0
    segment_base: int = 0
    segment_bytes: int = 0
    max_timestamp: int = -1


@dataclass(frozen=True, slots=True)
class TopicMeta:
    """A topic's persisted configuration."""

    partitions: int
    compacted: bool


EMPTY_PARTITION = PartitionState()


class JournalState:
    """Topics, committed partition states, group positions and writer epochs."""

    def __init__(self) -> None:
        self.topics: dict[str, TopicMeta] = {}
        self.partitions: dict[TopicPartition, PartitionState] = {}
        self.groups: dict[str, dict[TopicPartition, int]] = {}
        self.epochs: dict[str, int] = {}

    def partition(self, tp: TopicPartition) -> PartitionState:
        """The committed state of ``tp`` (empty if nothing was ever committed to it)."""
        return self.partitions.get(tp, EMPTY_PARTITION)

    def apply(self, rec: dict[str, Any]) -> None:
        """Apply one journal record."""
        kind = rec["t"]
        if kind == "commit":
            self._apply_parts(rec["parts"], rec["groups"])
            self.epochs[rec["id"]] = max(self.epochs.get(rec["id"], 0), rec["epoch"])
        elif kind == "topic":
            self.topics[rec["name"]] = TopicMeta(rec["partitions"], rec["compacted"])
        elif kind == "init":
            self.epochs[rec["id"]] = rec["epoch"]
        elif kind == "snapshot":
            self.topics = {name: TopicMeta(n, c) for name, n, c in rec["topics"]}
            self.partitions = {}
            self.groups = {}
            self._apply_parts(rec["parts"], rec["groups"])
            self.epochs = {txn_id: epoch for txn_id, epoch in rec["epochs"]}
        else:
            raise CorruptLogError(f"unknown journal record type {kind!r}")

    def _apply_parts(self, parts: list[list[Any]], groups: list[list[Any]]) -> None:
        for topic, p, end, base, nbytes, max_ts in parts:
            self.partitions[TopicPartition(topic, p)] = PartitionState(end, base, nbytes, max_ts)
        for group, topic, p, pos in groups:
            self.groups.setdefault(group, {})[TopicPartition(topic, p)] = pos

    def snapshot(self) -> dict[str, Any]:
        """A record that recreates this state."""
        return {
            "t": "snapshot",
            "topics": [[n, m.partitions, m.compacted] for n, m in self.topics.items()],
            "parts": [[*tp, *_fields(s)] for tp, s in self.partitions.items()],
            "groups": [[g, *tp, pos] for g, ps in self.groups.items() for tp, pos in ps.items()],
            "epochs": [[i, e] for i, e in self.epochs.items()],
        }


def _fields(s: PartitionState) -> list[int]:
    return [s.end, s.segment_base, s.segment_bytes, s.max_timestamp]


def commit_record(
    txn_id: str,
    epoch: int,
    parts: dict[TopicPartition, PartitionState],
    groups: dict[str, dict[TopicPartition, int]],
) -> dict[str, Any]:
    """The journal record that commits a transaction."""
    return {
        "t": "commit",
        "id": txn_id,
        "epoch": epoch,
        "parts": [[*tp, *_fields(s)] for tp, s in parts.items()],
        "groups": [[g, *tp, pos] for g, ps in groups.items() for tp, pos in ps.items()],
    }


def encode_record(rec: dict[str, Any]) -> bytes:
    """One journal frame."""
    payload = json.dumps(rec, separators=(",", ":")).encode()
    return _FRAME.pack(len(payload), zlib.crc32(payload)) + payload


def decode_records(data: bytes) -> tuple[list[dict[str, Any]], int]:
    """The valid records at the start of ``data`` and how many bytes they span."""
    records: list[dict[str, Any]] = []
    pos = 0
    while pos + _FRAME.size <= len(data):
        length, crc = _FRAME.unpack_from(data, pos)
        end = pos + _FRAME.size + length
        if length > _MAX_RECORD_BYTES or end > len(data):
            break
        payload = data[pos + _FRAME.size : end]
        if zlib.crc32(payload) != crc:
            break
        try:
            rec = json.loads(payload)
        except ValueError:
            break
        records.append(rec)
        pos = end
    return records, pos


class Journal:
    """A handle on a log directory's journal: the replayed state and locked, durable appends."""

    def __init__(self, root: str, *, sync: bool = True, rotate_bytes: int = 64 << 20) -> None:
        self.root = root
        self.path = os.path.join(root, JOURNAL_FILE)
        self.sync = sync
        self.rotate_bytes = rotate_bytes
        self.state = JournalState()
        self.mutex = threading.RLock()
        self._lock = FileLock(os.path.join(root, JOURNAL_LOCK))
        self._fd = -1  # opened once the journal exists: reading a missing log creates nothing
        self._pos = 0
        self.refresh()

    def _open(self, *, create: bool) -> bool:
        """Open the journal file if needed; create the log directory and file only if ``create``."""
        if self._fd >= 0:
            return True
        if not create:
            try:
                self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND)
            except FileNotFoundError:
                return False
            return True
        os.makedirs(os.path.join(self.root, TOPICS_DIR), exist_ok=True)
        created = not os.path.exists(self.path)
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        if created and self.sync:
            fsync_directory(self.root)
        return True

    def refresh(self) -> bool:
        """Apply what other handles appended (or a rotation); return whether anything changed."""
        with self.mutex:
            return self._catch_up(repair=False)

    def _catch_up(self, repair: bool) -> bool:
        if not self._open(create=False):  # a write opened it in locked(); a read needs none
            return False
        changed = False
        while True:
            size = os.fstat(self._fd).st_size
            if size < self._pos:
                self._reopen()
                changed = True
                continue
            if size > self._pos:
                data = os.pread(self._fd, size - self._pos, self._pos)
                records, used = decode_records(data)
                for rec in records:
                    self.state.apply(rec)
                self._pos += used
                changed = changed or bool(records)
                if used < len(data):
                    if repair:
                        os.ftruncate(self._fd, self._pos)
                        os.fsync(self._fd)
                    return changed
            try:
                if os.stat(self.path).st_ino == os.fstat(self._fd).st_ino:
                    return changed
            except FileNotFoundError:
                return changed
            self._reopen()
            changed = True

    def _reopen(self) -> None:
        os.close(self._fd)
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self._pos = 0
        self.state = JournalState()

    @contextmanager
    def locked(self, timeout_s: float) -> Iterator[JournalState]:
        """Hold the journal lock, caught up (torn tail truncated), to append records."""
        with self.mutex:
            self._open(create=True)
            self._lock.acquire(timeout_s)
            try:
                self._catch_up(repair=True)
                yield self.state
            finally:
                self._lock.release()

    def append(self, rec: dict[str, Any]) -> None:
        """Append and fsync ``rec`` (the caller holds ``locked()``), then apply it."""
        if not self._lock.held:
            raise RuntimeError("journal append without the journal lock")
        frame = encode_record(rec)
        try:
            written = os.write(self._fd, frame)
            if written != len(frame):
                raise OSError(f"short write to {self.path}: {written} of {len(frame)} bytes")
            if self.sync:
                os.fdatasync(self._fd)
        except BaseException:
            # Not committed: make sure the record cannot surface later either.
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, self._pos)
            raise
        self.state.apply(rec)
        self._pos += len(frame)
        if self._pos > self.rotate_bytes:
            try:
                self._rotate()
            except OSError:  # the record is committed; rotation is retried on the next append
                _log.exception("rotating %s failed", self.path)

    def _rotate(self) -> None:
        snapshot = encode_record(self.state.snapshot())
        tmp = self.path + ".tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            if os.write(fd, snapshot) != len(snapshot):
                raise OSError(f"short write to {tmp}")
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        os.close(self._fd)
        self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND)
        self._pos = len(snapshot)
        fsync_directory(self.root)

    def close(self) -> None:
        """Close the journal file."""
        with self.mutex:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
