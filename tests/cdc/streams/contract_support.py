"""Helpers of the stream contract checks: openers, fresh topic names, polling."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable, Iterator

from cdc.streams.protocol import EventStream, StreamReader, StreamRecord

StreamOpener = Callable[[], EventStream]


NOW_MS = int(time.time()) * 1000
"""A recent base for record timestamps: Kafka's time retention (7 days by default) deletes records
stamped in 1970 at its next check (every 5 minutes), so offset 0 could vanish mid-check."""


def new_topic(prefix: str = "contract") -> str:
    """A topic name no other check uses."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


@contextlib.contextmanager
def opened(open_stream: StreamOpener) -> Iterator[EventStream]:
    """A stream handle closed on exit."""
    stream = open_stream()
    try:
        yield stream
    finally:
        stream.close()


def poll_until(reader: StreamReader, count: int, timeout_s: float = 30.0) -> list[StreamRecord]:
    """Poll until ``count`` records arrived (fails after ``timeout_s``)."""
    records: list[StreamRecord] = []
    deadline = time.monotonic() + timeout_s
    while len(records) < count:
        assert time.monotonic() < deadline, f"only {len(records)} of {count} records arrived"
        records += reader.poll(max_records=count - len(records), timeout_s=0.5)
    return records


def values(records: Iterator[StreamRecord] | list[StreamRecord]) -> list[bytes | None]:
    """The values of ``records``."""
    return [r.value for r in records]
