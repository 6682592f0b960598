"""The writer side of one partition: buffered appends, segment rolls, index entries, rollback.

Only a holder of the log directory's transaction lock touches the files: it first truncates the
partition to its committed state (deleting frames of transactions that never committed), then
appends. Bytes beyond the committed state are invisible to readers, so a crash anywhere leaves
at most garbage that the next writer truncates.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence

from cdc.streams.local.errors import CorruptLogError
from cdc.streams.local.frames import encode_frame
from cdc.streams.local.journal import PartitionState
from cdc.streams.local.segments import (
    CLEANED_SUFFIX,
    INDEX_ENTRY,
    index_path,
    list_segments,
    log_path,
    read_index,
)
from cdc.streams.protocol import TopicPartition

FLUSH_BYTES = 1 << 20


class PartitionAppender:
    """Appends records to a partition's active segment; ``sync`` makes them committable."""

    def __init__(
        self,
        directory: str,
        topic: str,
        partition: int,
        committed: PartitionState,
        *,
        segment_bytes: int,
        index_interval_bytes: int,
        sync: bool,
    ) -> None:
        self.directory = directory
        self.topic = topic
        self.partition = partition
        self.tp = TopicPartition(topic, partition)
        self.committed = committed
        self.rolled_bytes = 0
        self._segment_limit = segment_bytes
        self._interval = index_interval_bytes
        self._sync = sync
        self._fd = -1
        self._idx_fd = -1
        self._closed_fds: list[int] = []
        os.makedirs(directory, exist_ok=True)
        self._restore(committed)

    @property
    def next_offset(self) -> int:
        """The offset the next appended record gets."""
        return self._next

    def _restore(self, state: PartitionState) -> None:
        """Truncate the partition's files to the committed ``state`` and reopen them."""
        self._close_files()
        for base in list_segments(self.directory):
            if base > state.segment_base:
                _unlink(log_path(self.directory, base))
                _unlink(index_path(self.directory, base))
        path = log_path(self.directory, state.segment_base)
        created = not os.path.exists(path)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        size = os.fstat(fd).st_size
        if size < state.segment_bytes:
            os.close(fd)
            raise CorruptLogError(
                f"segment has {size} bytes but {state.segment_bytes} are committed",
                path=path,
                topic=self.topic,
                partition=self.partition,
            )
        if size > state.segment_bytes:
            os.ftruncate(fd, state.segment_bytes)
        idx = index_path(self.directory, state.segment_base)
        entries = read_index(idx, state.segment_bytes)
        keep = b"".join(INDEX_ENTRY.pack(*e) for e in entries)
        if not os.path.exists(idx) or os.path.getsize(idx) != len(keep):
            with open(idx, "wb") as f:
                f.write(keep)
        self._fd = fd
        self._idx_fd = os.open(idx, os.O_WRONLY | os.O_APPEND)
        self._base = state.segment_base
        self._size = state.segment_bytes
        self._next = state.end
        self._max_ts = state.max_timestamp
        self._since_index = state.segment_bytes - (entries[-1].position if entries else 0)
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._pending_index: list[bytes] = []
        self._new_files = created

    def append(
        self,
        key: bytes | None,
        value: bytes | None,
        timestamp_ms: int,
        headers: Sequence[tuple[str, bytes]],
    ) -> int:
        """Buffer one record; return its offset."""
        offset = self._next
        frame = encode_frame(offset, timestamp_ms, key, value, headers)
        position = self._size + self._pending_bytes
        if position > 0 and position + len(frame) > self._segment_limit:
            self._roll(offset)
            position = 0
        if self._since_index >= self._interval:
            self._pending_index.append(INDEX_ENTRY.pack(offset, position, self._max_ts))
            self._since_index = 0
        self._pending.append(frame)
        self._pending_bytes += len(frame)
        self._since_index += len(frame)
        if timestamp_ms > self._max_ts:
            self._max_ts = timestamp_ms
        self._next = offset + 1
        if self._pending_bytes >= FLUSH_BYTES:
            self.flush()
        return offset

    def flush(self) -> None:
        """Write buffered frames (one write per flush) and index entries."""
        if self._pending:
            data = b"".join(self._pending)
            written = 0
            while written < len(data):
                written += os.pwrite(self._fd, data[written:], self._size + written)
            self._size += len(data)
            self._pending.clear()
            self._pending_bytes = 0
        if self._pending_index:
            os.write(self._idx_fd, b"".join(self._pending_index))
            self._pending_index.clear()

    def _roll(self, base: int) -> None:
        self.flush()
        self.rolled_bytes += self._size
        self._closed_fds.append(self._fd)
        os.close(self._idx_fd)
        self._fd = os.open(
            log_path(self.directory, base), os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644
        )
        self._idx_fd = os.open(
            index_path(self.directory, base), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND
        )
        self._base = base
        self._size = 0
        self._max_ts = -1
        self._since_index = 0
        self._new_files = True

    def prepare(self) -> tuple[PartitionState, list[int], list[str]]:
        """Flush the transaction's frames; return the state committing them, and the files
        (descriptors) and directories to fsync before it may be committed."""
        self.flush()
        fds = [*self._closed_fds, self._fd] if self._sync else []
        dirs = [self.directory] if self._sync and self._new_files else []
        return PartitionState(self._next, self._base, self._size, self._max_ts), fds, dirs

    def committed_as(self, state: PartitionState) -> None:
        """Record that ``state`` (from ``prepare``) is now committed."""
        self.committed = state
        self._new_files = False
        for fd in self._closed_fds:
            os.close(fd)
        self._closed_fds.clear()

    def rollback(self) -> None:
        """Discard everything since the last commit, on disk too."""
        self._restore(self.committed)

    def is_current(self, committed: PartitionState) -> bool:
        """Whether this appender's view still matches the journal and the files."""
        return (
            committed == self.committed
            and not self._pending
            and os.fstat(self._fd).st_size == self._size
        )

    def _close_files(self) -> None:
        for fd in [*self._closed_fds, self._fd, self._idx_fd]:
            if fd >= 0:
                os.close(fd)
        self._closed_fds.clear()
        self._fd = self._idx_fd = -1

    def close(self) -> None:
        """Close the files (uncommitted frames stay on disk until the next rollback/recovery)."""
        self._close_files()


def _unlink(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def recover_partition(directory: str, state: PartitionState) -> None:
    """Truncate a partition nobody is appending to back to its committed ``state``."""
    if not os.path.isdir(directory):
        return
    for name in os.listdir(directory):
        if name.endswith(CLEANED_SUFFIX):
            _unlink(os.path.join(directory, name))
    for base in list_segments(directory):
        if base > state.segment_base:
            _unlink(log_path(directory, base))
            _unlink(index_path(directory, base))
    path = log_path(directory, state.segment_base)
    if os.path.exists(path) and os.path.getsize(path) > state.segment_bytes:
        os.truncate(path, state.segment_bytes)
        entries = read_index(index_path(directory, state.segment_base), state.segment_bytes)
        with open(index_path(directory, state.segment_base), "wb") as f:
            f.write(b"".join(INDEX_ENTRY.pack(*e) for e in entries))
