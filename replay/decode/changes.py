"""Raw change records to typed change rows, decoded on the JVM with ``from_json``.

``decode_native(records, schema)`` reads the RAW_SCHEMA columns of ``replay.reading.sources``
(with ``VALUE_HEAD`` where a driver read cut the values' schema text: a rejected record shows its
value whole again) and returns ``Decoded(good, bad)``. ``good`` holds one row per change
event: the table's columns (decoded types, see ``connect_types``) and

- ``__op``: ``u`` (c/u/r), ``d`` (delete: the ``before`` image, key columns filled from the
  record key), or ``t`` (truncate: null columns); logical messages (``m``) are left out (the
  record key is parsed, and checked, only where the image lacks a key column);
- ``__pos``: the ordering text of ``position``;
- ``__unavailable``: the columns whose value Debezium could not read (unchanged TOAST); their
  value is null and must be taken from the row's previous image, never written as data;
- ``__txn`` (source transaction id: ``transaction.id``, PostgreSQL's without its ``:<LSN>``
  suffix; else PostgreSQL ``txId``, else MySQL ``gtid``), ``__source`` (the ``source`` struct),
  ``__topic``, ``__partition``, ``__offset``, ``__key`` (record key bytes).

``bad`` holds the records that are not valid JSON or not valid change events (topic, partition,
offset, key, value, reason), for the engine's ``--on-error`` policy; the reason of a record that
does not parse comes from the ``cdc.events`` parser (a record that parser reads but this one
rejects, e.g. an Avro-JSON rendering, says so: decode that topic with ``decode_python``).
Tombstones (null values, null payloads) are in neither. ``good`` and ``bad`` share one plan:
persist ``Decoded.all`` to decode once for both.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from cdc.errors import ChangeEventError
from cdc.events.columns import TableSpec
from cdc.events.reader import ChangeEventReader
from replay.decode.codec import UnsupportedSchema
from replay.decode.expressions import (
    ERROR,
    KEY,
    OFFSET,
    PARTITION,
    SOURCE,
    TOPIC,
    TXN,
    UNAVAILABLE,
    VALUE,
    decode_stages,
)
from replay.decode.schema import TopicSchema
from replay.decode.schema_versions import aligned, schema_hash
from replay.driver_frames import ColumnList
from replay.expression_cache import ExpressionCache
from replay.reading.sources import VALUE_HEAD, joined_value, whole_records
from replay.sinks.protocol import OP, POS
from replay.spark import Column, DataFrame, F, T

DECODED_META = (OP, POS, UNAVAILABLE, TXN, SOURCE, TOPIC, PARTITION, OFFSET, KEY)
"""The meta columns of a decoded change frame, after the table's columns."""
BAD_COLUMNS = ("topic", "partition", "offset", "key", "value", "reason")
__all__ = [
    "BAD_COLUMNS", "DECODED_META", "ERROR", "KEY", "OFFSET", "PARTITION", "SOURCE", "TOPIC",
    "TXN", "UNAVAILABLE", "VALUE", "Decoded", "Decoder", "decode_native", "explain_bad",
]  # fmt: skip


@dataclass(frozen=True)
class Decoded:
    """Decoded changes (``good``) and rejected records (``bad``), from one plan (``all``)."""

    all: DataFrame
    schema: TopicSchema

    @property
    def good(self) -> DataFrame:
        """The change rows (see the module doc)."""
        return self.all.where(F.col(ERROR).isNull()).drop(ERROR, VALUE)

    @property
    def bad(self) -> DataFrame:
        """The rejected records with the reason (``BAD_COLUMNS``)."""
        rejected = self.all.where(F.col(ERROR).isNotNull())
        return explain_bad(rejected, self.schema.table)


Decoder = Callable[[DataFrame, TopicSchema, Sequence[str]], Decoded]
"""``decode_native`` or ``fallback.decode_python``."""


def decode_native(records: DataFrame, schema: TopicSchema, carry: Sequence[str] = ()) -> Decoded:
    """Decode the change records of one topic (see the module doc); the ``carry`` columns of
    ``records`` are passed through after the meta columns. Raises ``UnsupportedSchema`` for a
    topic only the Python path reads (``schema.native`` false)."""
    if not schema.native:
        raise UnsupportedSchema("flat rows (ExtractNewRecordState) decode on the Python path")
    if schema.versions:  # told apart by their schema text
        return _decode_versions(whole_records(records), schema, carry)
    cut = VALUE_HEAD in records.columns  # values handed over without their schema text
    own = (*carry, VALUE_HEAD) if cut else tuple(carry)
    plan = _plans.get(schema, own, lambda: _NativePlan.of(schema, own))
    parsed = plan.parsed.select_from(records.where(plan.present))
    stepped = plan.envelope.select_from(parsed.where(plan.keep))
    for step in plan.steps:
        stepped = step.select_from(stepped)
    converted = plan.converted.select_from(stepped)
    decoded = plan.decoded.select_from(converted).withColumn(VALUE, plan.kept)
    return Decoded(decoded.drop(VALUE_HEAD) if cut else decoded, schema)


@dataclass(frozen=True)
class _NativePlan:
    """``decode_native``'s filters and projections, handed to the JVM once per schema."""

    present: Column
    parsed: ColumnList
    keep: Column
    envelope: ColumnList
    steps: tuple[ColumnList, ...]
    converted: ColumnList
    decoded: ColumnList
    kept: Column

    @classmethod
    def of(cls, schema: TopicSchema, carry: tuple[str, ...]) -> _NativePlan:
        stages = decode_stages(schema)
        whole = F.col(VALUE)  # put back together where a driver read cut it
        if VALUE_HEAD in carry:
            whole = joined_value(whole, F.col(VALUE_HEAD))
        raw = ["topic", "partition", "offset", "key", "value", *carry]
        return cls(
            F.col("value").isNotNull(),
            ColumnList([*raw, stages.parsed]),
            stages.keep,
            ColumnList([*raw, *stages.envelope]),
            tuple(ColumnList(["*", *level]) for level in stages.steps),
            ColumnList(["*", *stages.converted]),
            ColumnList([*stages.decoded, *carry]),
            # The raw value only where the record is rejected (``bad`` shows it): a persisted
            # decode then holds the decoded row, not a second copy of every record's bytes.
            F.when(F.col(ERROR).isNotNull(), whole),
        )


_plans: ExpressionCache[_NativePlan] = ExpressionCache()


def _decode_versions(records: DataFrame, schema: TopicSchema, carry: Sequence[str]) -> Decoded:
    """Each record by its own schema version, aligned to the unified columns (records of no
    listed version, e.g. without a schema, by the newest)."""
    hashed = records.withColumn("__schema_hash", schema_hash(F.col("value")))
    known = [h for h, _, _ in schema.versions]
    newest = next(v for _, v, strict in reversed(schema.versions) if strict)
    parts = [(hashed.where(F.col("__schema_hash") == h), v, s) for h, v, s in schema.versions]
    parts.append((hashed.where(~F.col("__schema_hash").isin(known)), newest, True))
    frames = []
    for part, version, strict in parts:
        decoded = decode_native(part.drop("__schema_hash"), version, carry).all
        columns, error = aligned(version, schema, strict)
        own = {c.name for c in version.columns}
        rest = [c for c in decoded.columns if c not in own and c != ERROR]
        image = F.when(F.col(OP) == "d", F.lit("before.")).otherwise(F.lit("after."))
        where = F.concat(F.lit("payload."), image)
        failed = F.coalesce(F.col(ERROR), F.concat(where, error))
        frames.append(decoded.select(*columns, *rest, failed.alias(ERROR)))
    first, *others = frames
    union = first
    for frame in others:
        union = union.unionByName(frame)
    ordered = [*(c.name for c in schema.columns), *DECODED_META, ERROR, VALUE, *carry]
    return Decoded(union.select(*(F.col(f"`{c}`") for c in ordered)), schema)


def _explainer(table: TableSpec | None) -> Callable[..., Column]:
    def explain(value: bytes, key: bytes | None, topic: str, partition: int, offset: int) -> str:
        reader = ChangeEventReader(table)
        try:
            reader.parse_value(value, key=key, topic=topic, partition=partition, offset=offset)
        except ChangeEventError as exc:
            return str(exc)
        return "the Python parser reads it: decode this topic with decode_python"

    udf: Callable[..., Column] = F.udf(explain, T.StringType(), useArrow=False)
    return udf


_bad_columns: ExpressionCache[list[Column]] = ExpressionCache()


def explain_bad(rejected: DataFrame, table: TableSpec | None) -> DataFrame:
    """``BAD_COLUMNS`` of rejected decoded rows; the parser's own message where it has one
    (a Python UDF: a check that selects only the origins leaves it out of its plan)."""
    return rejected.select(*_bad_columns.get(table, None, lambda: _explained_columns(table)))


def _explained_columns(table: TableSpec | None) -> list[Column]:
    explain = _explainer(table)
    parser_reason = explain(F.col(VALUE), F.col(KEY), F.col(TOPIC), F.col(PARTITION), F.col(OFFSET))
    corrupt = F.col(ERROR).startswith("not a valid record")
    reason = F.when(corrupt, parser_reason)
    return [
        F.col(TOPIC).alias("topic"),
        F.col(PARTITION).alias("partition"),
        F.col(OFFSET).alias("offset"),
        F.col(KEY).alias("key"),
        F.col(VALUE).alias("value"),
        F.when(reason.startswith("the Python parser"), F.concat_ws(": ", F.col(ERROR), reason))
        .otherwise(F.coalesce(reason, F.col(ERROR)))
        .alias("reason"),
    ]
