"""Offset-ledger rules shared by every sink: when a write is a retry, and what it records.

A table's ledger says, per topic-partition, the next offset the table still has to apply. A write
brings ``incoming`` positions; :func:`plan_positions` decides, before anything is written:

- the table has ledger entries and every incoming position is <= the stored one: a retried (or
  stale) batch, skipped (``None``);
- a merge with one position behind the ledger while another is ahead: refused
  (:class:`PositionsRegressedError`) — applying it would mix an old batch into a newer table;
- otherwise the positions to record: for a merge the stored ones advanced by the incoming ones,
  for a replace exactly the incoming ones (a rebuild states the whole position set).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping

from cdc.errors import UserError
from cdc.streams.protocol import TopicPartition
from replay.sinks.protocol import LedgerEntry, Positions

MODES = ("replace", "merge")
METADATA_KEY = "replicator"


class PositionsRegressedError(UserError, ValueError):
    """A merge's positions move backwards for a partition the table already reflects further."""

    def __init__(self, table: str, tp: TopicPartition, incoming: int, stored: int) -> None:
        self.table, self.tp, self.incoming, self.stored = table, tp, incoming, stored
        super().__init__(
            f"table {table}: position {incoming} for topic {tp.topic} partition {tp.partition} "
            f"is behind the ledger's {stored} while other partitions move forward"
        )


class UncastableValuesError(UserError, ValueError):
    """A table's existing rows hold values its source's new column type cannot take."""

    def __init__(self, table: str, column: str, old: str, new: str) -> None:
        super().__init__(
            f"table {table}: column {column} holds values that do not cast from {old} to {new} "
            "(the source rewrote them): rebuild the table from the log start"
        )


class VersionUnavailableError(UserError, LookupError):
    """The requested table, or version of it, is not available in the sink."""


def plan_positions(
    table: str, mode: str, stored: Mapping[TopicPartition, int] | None, incoming: Positions
) -> dict[TopicPartition, int] | None:
    """The positions a write records; None if the ledger ``stored`` (None: empty) covers it."""
    if mode not in MODES:
        raise ValueError(f"unknown write mode {mode!r}; expected one of {MODES}")
    if stored is None:
        return dict(incoming)
    if all(tp in stored and offset <= stored[tp] for tp, offset in incoming.items()):
        return None
    if mode == "replace":
        return dict(incoming)
    for tp, offset in sorted(incoming.items()):
        if tp in stored and offset < stored[tp]:
            raise PositionsRegressedError(table, tp, offset, stored[tp])
    return {**stored, **incoming}


def now_ms() -> int:
    """Wall-clock milliseconds since the epoch."""
    return time.time_ns() // 1_000_000


def encode_metadata(seq: int, mode: str, positions: Mapping[TopicPartition, int]) -> str:
    """JSON commit metadata: the write's sequence number, mode and positions."""
    entries = [
        {"topic": tp.topic, "partition": tp.partition, "next_offset": offset}
        for tp, offset in sorted(positions.items())
    ]
    return json.dumps({METADATA_KEY: {"seq": seq, "mode": mode, "positions": entries}})


def decode_metadata(text: str | None) -> tuple[int, str, dict[TopicPartition, int]] | None:
    """``(seq, mode, positions)`` from :func:`encode_metadata`'s JSON; None if not ours."""
    if not text:
        return None
    try:
        body = json.loads(text)[METADATA_KEY]
        positions = {
            TopicPartition(str(e["topic"]), int(e["partition"])): int(e["next_offset"])
            for e in body["positions"]
        }
        return int(body["seq"]), str(body["mode"]), positions
    except (ValueError, KeyError, TypeError):
        return None


def latest(entries: list[LedgerEntry]) -> LedgerEntry | None:
    """The newest entry (highest version), or None."""
    return max(entries, key=lambda e: e.version) if entries else None
