"""The Python decoding path: the ``cdc.events`` parser in Spark's Python workers.

For what the native path cannot read: ExtractNewRecordState flat rows, Avro-JSON renderings,
schemas whose types do not map to Spark (``connect_types.UnsupportedSchema``). It returns the
same ``Decoded`` frame as ``decode_native`` (same columns, types and ``__pos`` expression), so a
topic can switch paths without its sink noticing. It runs as an RDD ``mapPartitions`` with pickled
rows: ``mapInArrow`` needs pandas, which the project does not depend on.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from functools import partial
from typing import Any

from cdc.errors import ChangeEventError
from cdc.events import UNAVAILABLE, ChangeEvent, ChangeEventReader, Op, Tombstone
from replay.decode.changes import (
    DECODED_META,
    ERROR,
    OFFSET,
    PARTITION,
    SOURCE,
    VALUE,
    Decoded,
)
from replay.decode.changes import (
    UNAVAILABLE as UNAVAILABLE_COLUMN,
)
from replay.decode.position import event_position
from replay.decode.schema import SOURCE_TYPE, TopicSchema
from replay.reading.sources import whole_records
from replay.sinks.protocol import OP, OP_DELETE, OP_TRUNCATE, OP_UPSERT, POS
from replay.spark import DataFrame, F, T

SOURCE_NAMES = tuple(SOURCE_TYPE.fieldNames())
_META_TYPES: dict[str, T.DataType] = {
    OP: T.StringType(),
    POS: T.StringType(),
    UNAVAILABLE_COLUMN: T.ArrayType(T.StringType()),
    "__txn": T.StringType(),
    SOURCE: SOURCE_TYPE,
    "__topic": T.StringType(),
    PARTITION: T.IntegerType(),
    OFFSET: T.LongType(),
    "__key": T.BinaryType(),
}


def decoded_type(schema: TopicSchema, carry: Sequence[T.StructField] = ()) -> T.StructType:
    """The columns of ``Decoded.all``: the row, the meta columns, the error, the raw value and
    the ``carry`` columns."""
    fields = [*schema.row_type().fields]
    fields += [T.StructField(name, _META_TYPES[name]) for name in DECODED_META]
    fields += [T.StructField(ERROR, T.StringType()), T.StructField(VALUE, T.BinaryType())]
    return T.StructType([*fields, *carry])


def _source_tuple(event: ChangeEvent) -> tuple[Any, ...]:
    fields = event.source.model_dump(by_alias=True)
    return tuple(fields.get(name) for name in SOURCE_NAMES)


def _transaction_id(event: ChangeEvent) -> str | None:
    postgresql = event.source.connector == "postgresql"
    if event.transaction is not None:  # PostgreSQL's is "<txId>:<the event's LSN>"
        return event.transaction.id.split(":", 1)[0] if postgresql else event.transaction.id
    fields = event.source.model_dump(by_alias=True)
    if postgresql and fields.get("txId") is not None:
        return str(fields["txId"])
    gtid = fields.get("gtid")
    return None if gtid is None else str(gtid)


def change_values(
    schema: TopicSchema, event: ChangeEvent
) -> tuple[list[Any], list[str], str | None]:
    """(column values as Spark takes them, unavailable columns, error) of one change event."""
    op = event.op
    image = (event.before if op is Op.DELETE else event.after) or {}
    key = event.key.columns if event.key is not None else {}
    where = "payload.before" if op is Op.DELETE else "payload.after"
    keys = set(schema.primary_key)
    values: list[Any] = []
    unavailable: list[str] = []
    for spec in schema.columns:
        value = image.get(spec.name)
        if value is None and spec.name in keys:
            value = key.get(spec.name)
        if value is UNAVAILABLE:
            if op is not Op.DELETE:
                unavailable.append(spec.name)
            value = None
        elif value is not None:
            try:
                value = spec.codec.to_python(value)
            except (ValueError, TypeError, ArithmeticError, AttributeError) as exc:
                return [], [], f"{where}.{spec.name}: invalid value ({exc})"
        values.append(value)
    if op is not Op.TRUNCATE:
        for name in schema.primary_key:
            if values[[c.name for c in schema.columns].index(name)] is None:
                return [], [], f"key column {name} is null"
    return values, unavailable, None


def decoded_row(
    reader: ChangeEventReader,
    schema: TopicSchema,
    origin: tuple[str, int, int, bytes | None],
    value: bytes,
    carried: tuple[Any, ...] = (),
) -> tuple[Any, ...] | None:
    """One record (``origin``: topic, partition, offset, key) as a row of ``decoded_type``,
    the raw value in it; None for a tombstone or a logical message."""
    topic, partition, offset, key = origin
    empty = [None] * len(schema.columns)
    bad: tuple[Any, ...] = (*empty, None, None, [], None, None, *origin)
    try:
        parsed = reader.parse_value(value, key=key, topic=topic, partition=partition, offset=offset)
    except ChangeEventError as exc:
        return (*bad, str(exc), value, *carried)
    if isinstance(parsed, Tombstone):
        return None
    if not isinstance(parsed, ChangeEvent):
        return (*bad, f"not a change event: a {parsed.kind} event", value, *carried)
    if parsed.op is Op.MESSAGE:
        return None
    values, unavailable, error = change_values(schema, parsed)
    op = {Op.DELETE: OP_DELETE, Op.TRUNCATE: OP_TRUNCATE}.get(parsed.op, OP_UPSERT)
    meta = (op, None, unavailable, _transaction_id(parsed), _source_tuple(parsed), *origin)
    return (*(values or empty), *meta, error, value, *carried)


def _decode_partition(
    schema: TopicSchema, carry: Sequence[str], rows: Iterable[Any]
) -> Iterator[tuple[Any, ...]]:
    reader = ChangeEventReader(schema.table)
    for row in rows:
        origin = (row.topic, row.partition, row.offset, row.key)
        carried = tuple(row[name] for name in carry)
        decoded = decoded_row(reader, schema, origin, row.value, carried)
        if decoded is not None:
            yield decoded


def decode_python(records: DataFrame, schema: TopicSchema, carry: Sequence[str] = ()) -> Decoded:
    """Decode the change records of one topic with the Python parser (see the module doc)."""
    records = whole_records(records)  # the parser reads values as the stream holds them
    rows = records.where(F.col("value").isNotNull()).rdd.mapPartitions(
        partial(_decode_partition, schema, tuple(carry))
    )
    carried = [records.schema[name] for name in carry]
    decoded = records.sparkSession.createDataFrame(
        rows, decoded_type(schema, carried), verifySchema=False
    )
    return Decoded(positioned(decoded, schema), schema)


def positioned(decoded: DataFrame, schema: TopicSchema, *, shipped: bool = False) -> DataFrame:
    """Rows of ``decoded_type`` with their ``__pos``, a record without one rejected; where
    ``shipped``, a row's own ``__pos`` is taken as it is (``task_survey`` writes it where sure)."""
    position = event_position(F.col(SOURCE), F.col(PARTITION), F.col(OFFSET), schema.connector)
    if shipped:
        position = F.coalesce(F.col(POS), position)
    missing = F.when(position.isNull(), F.lit("no source position (source fields missing)"))
    return decoded.withColumns({POS: position, ERROR: F.coalesce(F.col(ERROR), missing)})
