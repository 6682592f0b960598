"""Comparable source positions, so that replay never lets an older event overwrite a newer row.

A ``SourcePosition`` orders events of one key from one source log. Positions compare only with
positions of the same connector and stream (comparing others raises ``TypeError``); equal
positions mean the same change seen twice (a redelivery), or rows of one snapshot.

* PostgreSQL: ``(last_commit_lsn, lsn)`` from ``source.sequence`` (``["<last commit>", "<lsn>"]``).
  Changes stream in commit order, but a change's own LSN is not monotonic across transactions
  (they interleave in the WAL), while the last commit LSN is. Where the last commit LSN is null
  (snapshot rows, the first transaction after a start) or ``sequence`` is absent (Debezium < 1.5),
  the event's LSN stands in for it.
* MySQL: ``(binlog file number, pos, row)``; ``mysql-bin.000010`` sorts after ``mysql-bin.000009``
  by its numeric suffix, not its text. An empty file name (Flink CDC snapshot rows) is number 0.
* SQL Server: ``(commit_lsn, change_lsn, event_serial_no)``, LSNs ``00000025:00000d98:0002`` read
  as one hexadecimal number; a null ``change_lsn`` (snapshot rows) counts as 0.
* replicator: ``(input_offset_end, commit_seq)`` within one input topic-partition (the stream):
  the input offsets that produced a write order it, and the processor's commit sequence breaks
  ties between writes produced by the same input range. A commit writes at most one image per
  key (state-store writes are keyed), so two writes of a key never share a position.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from cdc.errors import ChangeEventError

_SQLSERVER_LSN = re.compile(r"[0-9A-Fa-f]{8}:[0-9A-Fa-f]{8}:[0-9A-Fa-f]{4}")
_PG_TEXT_LSN = re.compile(r"([0-9A-Fa-f]{1,8})/([0-9A-Fa-f]{1,8})")


@dataclass(frozen=True, slots=True)
class SourcePosition:
    """Where an event sits in its source log; ``order`` is compared lexicographically."""

    connector: str
    order: tuple[int, ...]
    stream: str = ""

    def _order_against(self, other: object) -> tuple[int, ...]:
        if not isinstance(other, SourcePosition):
            raise TypeError(f"cannot compare a source position with {type(other).__name__}")
        if (other.connector, other.stream) != (self.connector, self.stream):
            raise TypeError(
                f"positions of {self.connector} {self.stream!r} and "
                f"{other.connector} {other.stream!r} are not comparable"
            )
        return other.order

    def __lt__(self, other: object) -> bool:
        return self.order < self._order_against(other)

    def __le__(self, other: object) -> bool:
        return self.order <= self._order_against(other)

    def __gt__(self, other: object) -> bool:
        return self.order > self._order_against(other)

    def __ge__(self, other: object) -> bool:
        return self.order >= self._order_against(other)

    def is_newer_than(self, other: SourcePosition | None) -> bool:
        """True when an event at this position should replace a row written at ``other``."""
        return other is None or self > other


def pg_lsn(text: str) -> int:
    """A PostgreSQL LSN given as decimal text (``"23911624"``) or as ``"16/B374D848"``."""
    match = _PG_TEXT_LSN.fullmatch(text)
    if match:
        return int(match[1], 16) << 32 | int(match[2], 16)
    return int(text)


def pg_sequence(sequence: str) -> tuple[int | None, int | None]:
    """``source.sequence`` of PostgreSQL, ``'["<last commit lsn>","<lsn>"]'``, as two LSNs."""
    try:
        parts = json.loads(sequence)
        if not isinstance(parts, list) or len(parts) != 2:
            raise ValueError("expected two elements")
        first, second = (None if part is None else pg_lsn(str(part)) for part in parts)
    except ValueError as exc:
        reason = f"bad PostgreSQL sequence {sequence!r}: {exc}"
        raise ChangeEventError(reason, field="source.sequence") from None
    return first, second


def postgres_position(lsn: int | None, sequence: str | None) -> SourcePosition:
    """The position of a PostgreSQL event from ``source.lsn`` and ``source.sequence``."""
    last_commit, sequence_lsn = pg_sequence(sequence) if sequence else (None, None)
    current = lsn if lsn is not None else sequence_lsn
    if current is None:
        raise ChangeEventError("PostgreSQL event without an LSN", field="source.lsn")
    return SourcePosition("postgresql", (current if last_commit is None else last_commit, current))


def binlog_number(file: str) -> int:
    """The numeric suffix of a binlog file name (``mysql-bin.000035`` -> 35); ``""`` -> 0."""
    if not file:
        return 0
    suffix = file.rpartition(".")[2]
    if not suffix.isdigit():
        raise ChangeEventError(f"binlog file name without a number: {file!r}", field="source.file")
    return int(suffix)


def mysql_position(file: str | None, pos: int | None, row: int | None) -> SourcePosition:
    """The position of a MySQL/MariaDB event from ``source.file``, ``pos`` and ``row``."""
    if file is None or pos is None:
        raise ChangeEventError("MySQL event without a binlog file and pos", field="source.file")
    return SourcePosition("mysql", (binlog_number(file), pos, row or 0))


def sqlserver_lsn(text: str, field: str) -> int:
    """A SQL Server LSN ``00000025:00000d98:0002`` as one integer (its order is kept)."""
    if not _SQLSERVER_LSN.fullmatch(text):
        raise ChangeEventError(f"bad SQL Server LSN {text!r}", field=field)
    return int(text.replace(":", ""), 16)


def sqlserver_position(
    commit_lsn: str | None, change_lsn: str | None, event_serial_no: int | None
) -> SourcePosition:
    """The position of a SQL Server event from its commit LSN, change LSN and serial number."""
    if commit_lsn is None:
        raise ChangeEventError("SQL Server event without a commit LSN", field="source.commit_lsn")
    change = 0 if change_lsn is None else sqlserver_lsn(change_lsn, "source.change_lsn")
    order = (sqlserver_lsn(commit_lsn, "source.commit_lsn"), change, event_serial_no or 0)
    return SourcePosition("sqlserver", order)


def replicator_position(
    input_topic: str, input_partition: int, input_offset_end: int, commit_seq: int
) -> SourcePosition:
    """The position of this product's own event: its processor's commit sequence, which orders
    commits across all the processor's input partitions (input offsets of different partitions
    do not compare); the changelog offset orders a key's changes within one commit."""
    return SourcePosition("replicator", (commit_seq,), "replicator")
