"""Where a replay starts and stops: the bound kinds a user can ask for, parsed from text.

Start bounds (inclusive: the first offset applied): ``earliest``, explicit per-partition offsets,
a timestamp (the first record at or after it), or ``ledger`` (the positions a sink last applied).
Stop bounds (exclusive offsets; inclusive timestamps and source positions): ``latest`` (the
committed end when the plan is made), per-partition offsets (the first offset NOT applied), a
timestamp (records with timestamp <= it), or a source position (events at or before it: a
PostgreSQL LSN, a MySQL binlog file/position, or this product's own transaction id); a source
position cut never splits a source transaction.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from cdc.errors import UsageError
from cdc.streams.protocol import TopicPartition


class BoundKind(StrEnum):
    EARLIEST = "earliest"
    LATEST = "latest"
    OFFSETS = "offsets"
    TIMESTAMP = "timestamp"
    LEDGER = "ledger"
    LSN = "lsn"
    BINLOG = "binlog"
    TXN = "txn"


@dataclass(frozen=True)
class Bound:
    """A start or stop bound; only the fields of its kind are set."""

    kind: BoundKind
    offsets: dict[TopicPartition, int] = field(default_factory=dict)
    timestamp_ms: int | None = None
    lsn: int | None = None
    binlog: tuple[str, int] | None = None
    txn: str | None = None

    @property
    def is_source_position(self) -> bool:
        return self.kind in (BoundKind.LSN, BoundKind.BINLOG, BoundKind.TXN)


_OFFSET_ITEM = re.compile(r"^(?P<topic>[A-Za-z0-9._-]+):(?P<partition>\d+):(?P<offset>\d+)$")


def parse_lsn(text: str) -> int:
    """A PostgreSQL LSN, as ``16/B374D848`` or a decimal integer."""
    if "/" in text:
        high, low = text.split("/", 1)
        return (int(high, 16) << 32) | int(low, 16)
    return int(text)


def parse_bound(text: str, *, stop: bool) -> Bound:
    """Parse a bound from the CLI/API text form; :class:`UsageError` naming it if it is not one.

    ``earliest`` | ``latest`` | ``ledger`` | ``topic:partition:offset[,…]`` |
    ``2024-05-01T12:00:00Z`` (ISO timestamp) | ``ts:<epoch ms>`` | ``lsn:16/B374D848`` |
    ``binlog:mysql-bin.000003:1041`` | ``txn:<transaction id>``.
    """
    try:
        return _parse_bound(text, stop=stop)
    except UsageError:
        raise
    except ValueError as exc:
        raise UsageError(f"cannot read bound {text!r}: {exc}") from exc


def _parse_bound(text: str, *, stop: bool) -> Bound:
    t = text.strip()
    low = t.lower()
    if low in ("earliest", "latest", "ledger"):
        kind = BoundKind(low)
        if (kind is BoundKind.LATEST) != stop:
            raise UsageError(f"{low!r} is not a {'stop' if stop else 'start'} bound")
        return Bound(kind)
    if low.startswith("ts:"):
        return Bound(BoundKind.TIMESTAMP, timestamp_ms=int(t[3:]))
    prefixes = ("lsn:", "binlog:", "txn:")
    if low.startswith(prefixes):
        if not stop:
            raise UsageError(f"a source position ({t!r}) is a stop bound only")
        if low.startswith("lsn:"):
            return Bound(BoundKind.LSN, lsn=parse_lsn(t[4:]))
        if low.startswith("binlog:"):
            file, _, pos = t[7:].rpartition(":")
            if not file or not pos.isdigit():
                raise UsageError(f"binlog bound {t!r} is not binlog:<file>:<position>")
            return Bound(BoundKind.BINLOG, binlog=(file, int(pos)))
        return Bound(BoundKind.TXN, txn=t[4:])
    try:
        when = datetime.fromisoformat(t.replace("Z", "+00:00"))
    except ValueError:
        when = None
    if when is None and all(_OFFSET_ITEM.match(item) for item in t.split(",")):
        offsets = {}
        for item in t.split(","):
            m = _OFFSET_ITEM.match(item)
            assert m is not None
            offsets[TopicPartition(m["topic"], int(m["partition"]))] = int(m["offset"])
        return Bound(BoundKind.OFFSETS, offsets=offsets)
    if when is None:
        raise UsageError(
            f"cannot read bound {t!r}: expected earliest, latest, ledger, topic:partition:offset, "
            "an ISO timestamp, ts:<ms>, lsn:<X/Y>, binlog:<file>:<pos> or txn:<id>"
        )
    if when.tzinfo is None:
        raise UsageError(f"timestamp {t!r} needs a time zone (e.g. a trailing Z for UTC)")
    return Bound(BoundKind.TIMESTAMP, timestamp_ms=int(when.timestamp() * 1000))
