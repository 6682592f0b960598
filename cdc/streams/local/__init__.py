"""The embedded local log: the zero-setup ``EventStream``, chosen by ``local:///abs/dir``.

Modules: ``frames`` (record framing), ``segments`` (segment files, sparse indexes, the
standalone segment decoder), ``journal`` (commit journal), ``appender``/``cursor`` (the write and
read side of a partition), ``compaction``, ``writer``/``reader``/``log`` (the protocol classes).
"""

from __future__ import annotations

from cdc.streams.local.compaction import CompactionResult
from cdc.streams.local.errors import (
    CorruptLogError,
    FencedWriterError,
    LocalLogError,
    TopicConfigError,
    WriterLockTimeout,
)
from cdc.streams.local.log import LocalLog
from cdc.streams.local.reader import LocalStreamReader
from cdc.streams.local.segments import RecordTuple, SegmentFile, decode_segment_file
from cdc.streams.local.settings import LocalLogSettings
from cdc.streams.local.writer import LocalTransactionalWriter


def open_local_log(url: str) -> LocalLog:
    """Open the local log of a ``local://`` URL."""
    return LocalLog.from_url(url)


__all__ = [
    "CompactionResult",
    "CorruptLogError",
    "FencedWriterError",
    "LocalLog",
    "LocalLogError",
    "LocalLogSettings",
    "LocalStreamReader",
    "LocalTransactionalWriter",
    "RecordTuple",
    "SegmentFile",
    "TopicConfigError",
    "WriterLockTimeout",
    "decode_segment_file",
    "open_local_log",
]
