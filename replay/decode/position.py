"""``__pos``: an event's source position as text that sorts (byte order) like ``SourcePosition``.

Each component is zero-padded to a fixed width, so text order is number order:

* PostgreSQL: ``hex16(last commit LSN, else LSN) || hex16(LSN)`` (``source.sequence`` is the
  JSON text ``["<last commit>","<lsn>"]``, LSNs as decimal or ``X/Y`` text);
* MySQL/MariaDB: ``dec19(binlog file number) || dec20(pos) || dec10(row)``;
* SQL Server: ``hex20(commit_lsn) || hex20(change_lsn, else 0) || dec20(event_serial_no)``;
* replicator: ``dec20(commit_seq)`` (the processor's commits are sequential);
* other connectors: nothing (stream order only).

The stream position ``dec10(partition) || dec20(offset)`` is always appended as the tiebreaker
(equal source positions: snapshot rows, redeliveries). Positions of a connector whose fields are
missing, negative or malformed are null: the decoder reports those records as bad.
"""

from __future__ import annotations

from replay.spark import Column, F, T

_SEQUENCE_TYPE = T.ArrayType(T.StringType())
_DIGITS = r"^[0-9]+$"
_SQLSERVER_LSN = r"^[0-9A-Fa-f]{8}:[0-9A-Fa-f]{8}:[0-9A-Fa-f]{4}$"


def _dec(value: Column, width: int) -> Column:
    # Widths hold every value of the column's type (lpad would cut a longer text).
    return F.when(value >= 0, F.lpad(value.cast("string"), width, "0"))


def _hex(value: Column, width: int) -> Column:
    return F.when(value >= 0, F.lpad(F.hex(value), width, "0"))


def stream_position(partition: Column, offset: Column) -> Column:
    """``dec10(partition) || dec20(offset)``: the record's place in its stream."""
    return F.concat(_dec(partition, 10), _dec(offset, 20))


STREAM_POSITION_CHARS = 30
"""The length of the stream part of ``__pos`` (``dec10(partition) || dec20(offset)``)."""


def source_part(pos: Column) -> Column:
    """The source part of a ``__pos`` (empty for a connector without source positions)."""
    return F.left(pos, F.length(pos) - F.lit(STREAM_POSITION_CHARS))


def pg_lsn(text: Column) -> Column:
    """A PostgreSQL LSN given as decimal text or as ``16/B374D848``, as a BIGINT."""
    high = F.conv(F.split_part(text, F.lit("/"), F.lit(1)), 16, 10).try_cast("bigint")
    low = F.conv(F.split_part(text, F.lit("/"), F.lit(2)), 16, 10).try_cast("bigint")
    slashed = F.shiftleft(high, 32).bitwiseOR(low)
    return F.when(text.contains("/"), slashed).otherwise(text.try_cast("bigint"))


def _pg_lsns(source: Column) -> tuple[Column, Column]:
    sequence = F.from_json(source["sequence"], _SEQUENCE_TYPE)
    current = F.coalesce(source["lsn"], pg_lsn(F.try_element_at(sequence, F.lit(2))))
    return F.coalesce(pg_lsn(F.try_element_at(sequence, F.lit(1))), current), current


def pg_current_lsn(source: Column) -> Column:
    """The event's own LSN: ``source.lsn``, else the second element of ``source.sequence``."""
    return _pg_lsns(source)[1]


def _postgres(source: Column) -> Column:
    last_commit, current = _pg_lsns(source)
    return F.concat(_hex(last_commit, 16), _hex(current, 16))


def binlog_number(file: Column) -> Column:
    """The numeric suffix of a binlog file name (``mysql-bin.000035`` -> 35; ``""`` -> 0)."""
    suffix = F.substring_index(file, ".", -1)
    return F.when(file == "", F.lit(0).cast("bigint")).when(
        suffix.rlike(_DIGITS), suffix.try_cast("bigint")
    )


def _mysql(source: Column) -> Column:
    row = F.coalesce(source["row"], F.lit(0))
    number = binlog_number(source["file"])
    return F.concat(_dec(number, 19), _dec(source["pos"], 20), _dec(row, 10))


def _sqlserver_lsn(text: Column) -> Column:
    return F.when(text.rlike(_SQLSERVER_LSN), F.upper(F.regexp_replace(text, ":", "")))


def _sqlserver(source: Column) -> Column:
    change = F.when(source["change_lsn"].isNull(), F.lit("0" * 20)).otherwise(
        _sqlserver_lsn(source["change_lsn"])
    )
    serial = F.coalesce(source["event_serial_no"], F.lit(0).cast("bigint"))
    return F.concat(_sqlserver_lsn(source["commit_lsn"]), change, _dec(serial, 20))


def _replicator(source: Column) -> Column:
    # A processor's commits are sequential: commit_seq orders them across all its input
    # partitions; within a commit the changelog offset (the tiebreaker after it) orders a key's
    # changes. Input offsets of different input partitions do not compare.
    return _dec(source["commit_seq"], 20)


_BRANCHES = {
    "postgresql": _postgres,
    "mysql": _mysql,
    "mariadb": _mysql,
    "sqlserver": _sqlserver,
    "replicator": _replicator,
}


def source_position(source: Column, connector: str | None = None) -> Column:
    """The source part of ``__pos`` for a ``source`` struct (see the module doc).

    With ``connector`` (a topic's events come from one connector) the expression reads only that
    connector's fields, and events of another connector get a null position."""
    name = source["connector"]
    if connector is not None:
        branch = _BRANCHES.get(connector)
        return F.when(name == connector, F.lit("") if branch is None else branch(source))
    position = F.when(F.lit(False), F.lit(""))
    for branch in dict.fromkeys(_BRANCHES.values()):
        names = [known for known, other in _BRANCHES.items() if other is branch]
        position = position.when(name.isin(*names), branch(source))
    return position.otherwise(F.lit(""))


def event_position(
    source: Column, partition: Column, offset: Column, connector: str | None = None
) -> Column:
    """``__pos``: the source position, then the stream position; null when the source position
    of a known connector cannot be read."""
    return F.concat(source_position(source, connector), stream_position(partition, offset))
