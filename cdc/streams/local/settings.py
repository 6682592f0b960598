"""Tuning of a local log, its ``local://`` URL, topic names and the directory layout.

Layout of a log directory::

    journal.log                         commit journal (see ``journal``)
    journal.lock                        held while appending to the journal
    writer.lock                         held by a writer during a transaction, and by compaction
    topics/<topic>/<partition>/<base>.log, <base>.idx    segments and their sparse indexes
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, fields, replace
from urllib.parse import parse_qsl

from cdc.errors import UsageError
from cdc.streams.local.errors import TopicConfigError

SCHEME = "local://"
WRITER_LOCK = "writer.lock"
TOPICS_DIR = "topics"
_TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")


@dataclass(frozen=True, slots=True)
class LocalLogSettings:
    """Tuning of a local log; each field can also be given as a URL query parameter."""

    segment_bytes: int = 64 << 20
    """A segment is closed and a new one started when a frame would push it past this size."""
    index_interval_bytes: int = 16 << 10
    """Bytes of frames between two sparse index entries."""
    delete_retention_ms: int = 24 * 3600 * 1000
    """Compaction drops a tombstone whose timestamp is older than this."""
    journal_rotate_bytes: int = 64 << 20
    """The journal is rewritten as one snapshot record when it grows past this size."""
    lock_timeout_s: float = 30.0
    """How long a writer waits for another writer's transaction to finish."""
    auto_compact_bytes: int | None = None
    """Compact a compacted topic's partition after this many bytes of segments were closed."""
    sync: bool = True
    """fsync at commit (only tests that never lose power should turn it off)."""
    poll_interval_s: float = 0.05
    """Longest sleep between two journal checks of a reader waiting for commits."""


def parse_url(url: str) -> tuple[str, LocalLogSettings]:
    """The absolute directory and settings of ``local:///abs/dir`` or ``local://rel/dir?k=v``."""
    if not url.startswith(SCHEME):
        raise UsageError(f"not a local log URL (expected {SCHEME}/path): {url!r}")
    rest, _, query = url[len(SCHEME) :].partition("?")
    if not rest:
        raise UsageError(f"local log URL without a directory: {url!r}")
    settings = LocalLogSettings()
    known = {f.name: type(getattr(settings, f.name)) for f in fields(LocalLogSettings)}
    changes: dict[str, object] = {}
    for name, text in parse_qsl(query, keep_blank_values=True):
        if name not in known:
            raise UsageError(f"unknown local log setting {name!r} in {url!r}")
        if name == "auto_compact_bytes":
            changes[name] = int(text) if text else None
        elif known[name] is bool:
            changes[name] = text.lower() in ("1", "true", "yes", "on")
        else:
            changes[name] = known[name](text)
    return os.path.abspath(rest), replace(settings, **changes)  # type: ignore[arg-type]


def validate_topic(topic: str) -> None:
    """Raise TopicConfigError unless ``topic`` is a valid (Kafka-compatible) topic name."""
    if not _TOPIC_NAME.fullmatch(topic) or topic in (".", ".."):
        raise TopicConfigError(
            f"invalid topic name {topic!r}: use 1-249 of the characters [A-Za-z0-9._-]"
        )


def partition_dir(root: str, topic: str, partition: int) -> str:
    """The directory of a partition's segments."""
    return os.path.join(root, TOPICS_DIR, topic, str(partition))
