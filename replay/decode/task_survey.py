"""A rebuild's survey read off the compaction tasks that decode its survivors.

``compaction.survey`` asks Spark one aggregation over the decode: on a cold driver it plans the
query and runs three jobs (the cache filled, a shuffle, the result), ~1 s of a first 1 M rebuild.
Where the tasks decode the survivors (``compacted_read.decoded_survivors``), each notes what it
ships (``RangeSurvey``): a record that may be a truncate, one that may be rejected, a keyed live
image that may lack an unchanged TOAST value, the keyed live images and about their Arrow bytes,
and the digests of the keyed changes' primary keys (``key_tally``), one entry per range in an
accumulator. Once one job has filled the cache, ``survey_taken`` puts them together: the
``Survey`` Spark's query gives.

``__pos`` is the JVM's (``position.event_position``), which rejects a record without one.
``source_text`` applies its rules to write the position's source part where it is surely not
null, and is conservative: a source it is unsure of counts as maybe rejected (the bad-record check
then runs) and as live (``live`` is then an upper bound, as ``Survey`` allows), and its row
ships its ``__source`` for the JVM to read. A row decoded without error and sure of its position
ships that position instead of its source, and no raw value (only a bad record keeps it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any, Final

from replay.decode.changes import DECODED_META, KEY, OFFSET, PARTITION, SOURCE, UNAVAILABLE
from replay.decode.compaction import ANYTHING, VARIABLE, Survey, arrow_widths
from replay.decode.fallback import SOURCE_NAMES
from replay.decode.key_tally import KeyTally, PerRange, RangeId, digest_array, key_digest
from replay.decode.position import STREAM_POSITION_CHARS
from replay.decode.schema import TopicSchema
from replay.reading.plan import PartitionRange
from replay.sinks.protocol import OP_TRUNCATE, OP_UPSERT, POS

Findings = tuple[bytes, bool, bool, bool, bool, int, int | None]
"""One range's: its keyed changes' key digests and whether each is exact (``key_tally``);
whether a record may be a truncate, may be rejected, may lack a TOAST value; its keyed live
images, and about their Arrow bytes (None: a nested column)."""
CANDIDATES: Final = 2
"""Where a ``Findings`` holds each (after the digests and their exactness)."""
REJECTED: Final = 3
LACKING: Final = 4
LIVE: Final = 5
LIVE_BYTES: Final = 6
_AT = {name: index for index, name in enumerate(SOURCE_NAMES)}
_CONNECTOR, _SEQUENCE, _LSN, _FILE = _AT["connector"], _AT["sequence"], _AT["lsn"], _AT["file"]
_BINLOG_POS, _ROW, _SERIAL = _AT["pos"], _AT["row"], _AT["event_serial_no"]
_CHANGE_LSN, _COMMIT_LSN, _COMMIT_SEQ = _AT["change_lsn"], _AT["commit_lsn"], _AT["commit_seq"]
_LONG_MAX, _INT_MAX = 2**63 - 1, 2**31 - 1
_DIGITS = re.compile(r"[0-9]{1,18}")  # Spark's try_cast to BIGINT cannot fail on these
_SQLSERVER_LSN = re.compile(r"[0-9A-Fa-f]{8}:[0-9A-Fa-f]{8}:[0-9A-Fa-f]{4}")


def source_text(source: tuple[Any, ...] | None, connector: str | None) -> str | None:
    """``position.source_position`` of a ``__source`` tuple, as the JVM writes it, where it is
    surely not null; None where unsure."""
    if source is None:
        return None
    name = source[_CONNECTOR]
    if connector is not None and name != connector:
        return None
    if name == "replicator":
        seq = source[_COMMIT_SEQ]
        return f"{seq:020d}" if _natural(seq) else None
    if name == "postgresql":
        return _postgres_text(source[_LSN], source[_SEQUENCE])
    if name == "mysql" or name == "mariadb":
        file, pos, row = source[_FILE], source[_BINLOG_POS], source[_ROW]
        if type(file) is not str or not _natural(pos):
            return None
        if row is not None and not _natural(row, _INT_MAX):  # ``row`` is an INT
            return None
        suffix = file.rsplit(".", 1)[-1]
        if file != "" and _DIGITS.fullmatch(suffix) is None:
            return None
        return f"{int(suffix) if file else 0:019d}{pos:020d}{row or 0:010d}"
    if name == "sqlserver":
        commit, change, serial = source[_COMMIT_LSN], source[_CHANGE_LSN], source[_SERIAL]
        if not _sqlserver_lsn(commit) or (change is not None and not _sqlserver_lsn(change)):
            return None
        if serial is not None and not _natural(serial):
            return None
        changed = "0" * 20 if change is None else change.replace(":", "").upper()
        return f"{commit.replace(':', '').upper()}{changed}{serial or 0:020d}"
    return ""  # no source part: the stream position only


def _natural(value: Any, most: int = _LONG_MAX) -> bool:
    """A non-negative integer the field's Spark type holds (a bigger one reaches the JVM as
    null, or narrowed)."""
    return type(value) is int and 0 <= value <= most


def _lsn_digits(text: Any) -> bool:
    return type(text) is str and _DIGITS.fullmatch(text) is not None


def _sqlserver_lsn(text: Any) -> bool:
    return type(text) is str and _SQLSERVER_LSN.fullmatch(text) is not None


def _postgres_text(lsn: Any, sequence: Any) -> str | None:
    """The last commit's LSN (the sequence's first, else the current) and the current one
    (``lsn``, else the sequence's second) as ``hex16 || hex16``; LSNs as ``X/Y`` count unsure."""
    items: list[Any] = []
    if sequence is not None:
        try:
            parsed = json.loads(sequence)
        except (ValueError, RecursionError):
            return None
        # Debezium's two LSNs as text (nothing Jackson may read otherwise than Python)
        if type(parsed) is not list or len(parsed) > 2:
            return None
        if any(item is not None and type(item) is not str for item in parsed):
            return None
        items = parsed
    if lsn is not None:
        if not _natural(lsn):
            return None
        current: int = lsn
    elif len(items) > 1 and _lsn_digits(items[1]):
        current = int(items[1])
    else:
        return None
    last = current
    if items and items[0] is not None:
        if not _lsn_digits(items[0]):
            return None
        last = int(items[0])
    return f"{last:016X}{current:016X}"


class RangeSurvey:
    """What one task's decoded rows (``fallback.decoded_type`` with ``__tombstoned`` and
    ``__candidate`` carried) hold: ``add`` each row, ``findings`` at the end."""

    def __init__(self, schema: TopicSchema) -> None:
        names = [c.name for c in schema.columns]
        self.connector = schema.connector
        self.where = [names.index(n) for n in schema.primary_key]
        self.op = len(names)
        self.unavailable = self.op + DECODED_META.index(UNAVAILABLE)
        self.source = self.op + DECODED_META.index(SOURCE)
        self.key = self.op + DECODED_META.index(KEY)
        self.pos = self.op + DECODED_META.index(POS)
        self.partition = self.op + DECODED_META.index(PARTITION)
        self.offset = self.op + DECODED_META.index(OFFSET)
        self.error = self.op + len(DECODED_META)
        self.value, self.tombstoned, self.candidate = self.error + 1, self.error + 2, self.error + 3
        widths = arrow_widths(schema.row_type(), names)
        self.sized = widths is not None
        self.variable = [i for i, width in enumerate(widths or ()) if width == VARIABLE]
        # A string's or binary's 4-byte offset, ``__pos``'s (a string) among them.
        self.fixed = sum(w for w in widths or () if w != VARIABLE) + 4 * (len(self.variable) + 1)
        self.digests = digest_array()
        self.exact = True
        self.candidates = self.rejected = self.lacking = False
        self.live = self.live_bytes = 0

    def add(self, row: tuple[Any, ...]) -> tuple[Any, ...]:
        """Note ``row``; returns it as shipped: without its raw value unless it is or may be
        rejected."""
        candidate, error, op = row[self.candidate], row[self.error], row[self.op]
        source = row[self.source]
        part = source_text(source, self.connector)  # None: unsure, the JVM's to compute
        if candidate:
            self.candidates = True
        elif error is None and op != OP_TRUNCATE:
            key = tuple([row[i] for i in self.where]) if self.where else (row[self.key],)
            digest, exact = key_digest(key)
            self.digests.append(digest)
            self.exact = self.exact and exact
        if error is not None or part is None:
            self.rejected = True
        if not candidate and op == OP_UPSERT and not row[self.tombstoned]:
            if row[self.unavailable]:
                self.lacking = True
            if error is None:
                self.live += 1
                if self.sized:
                    self.live_bytes += self._arrow_bytes(row, len(part or ""))
        if error is not None or part is None:
            return row
        shipped = list(row)  # its position instead of its source, and no raw value
        shipped[self.pos] = f"{part}{row[self.partition]:010d}{row[self.offset]:020d}"
        shipped[self.source] = shipped[self.value] = None
        return tuple(shipped)

    def _arrow_bytes(self, row: tuple[Any, ...], source_chars: int) -> int:
        size = self.fixed + STREAM_POSITION_CHARS + source_chars
        for i in self.variable:
            item = row[i]
            if type(item) is str:
                size += len(item) if item.isascii() else len(item.encode("utf-8", "surrogatepass"))
            elif item is not None:
                size += len(item)
        return size

    def findings(self) -> Findings:
        """What the rows added hold (``Findings``)."""
        live_bytes = self.live_bytes if self.sized else None
        return (self.digests.tobytes(), self.exact, self.candidates, self.rejected,
                self.lacking, self.live, live_bytes)  # fmt: skip


def range_key(r: PartitionRange) -> RangeId:
    """How a range's findings are keyed in the accumulator."""
    return (r.tp.topic, r.tp.partition, r.start)


def survey_taken(findings: PerRange, ranges: Iterable[PartitionRange]) -> Survey:
    """The ``Survey`` of a finished job's ``ranges``; their findings dropped from the accumulator
    (which the session keeps for its life). ``ANYTHING`` unless each range of any offset told
    its findings (Spark logs an accumulator update it fails to merge, and goes on)."""
    try:
        told = dict(findings.value)
    finally:
        findings.value = {}
    if not {range_key(r) for r in ranges if r.span > 0} <= told.keys():
        return ANYTHING
    each: list[Findings] = list(told.values())
    tally = KeyTally.of([(found[0], found[1]) for found in each])
    sizes = [found[LIVE_BYTES] for found in each]
    live_bytes = sum(s for s in sizes if s is not None) if None not in sizes else None
    return Survey(
        any(found[CANDIDATES] for found in each), any(found[REJECTED] for found in each),
        any(found[LACKING] for found in each), sum(found[LIVE] for found in each), live_bytes,
        tally.repeated, tally.keys,
    )  # fmt: skip
