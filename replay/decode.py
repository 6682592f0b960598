"""Raw change records to typed change rows, decoded on the JVM with ``from_json``.

``decode_native(records, schema)`` reads the RAW_SCHEMA columns of ``replay.sources`` and returns
``Decoded(good, bad)``. ``good`` holds one row per change event: the table's columns (decoded
types, see ``decode_types``) and

- ``__op``: ``u`` (c/u/r), ``d`` (delete: the ``before`` image, key columns filled from the
  record key), or ``t`` (truncate: null columns); logical messages (``m``) are left out (the
  record key is parsed, and checked, only where the image lacks a key column);
- ``__pos``: the ordering text of ``decode_position``;
- ``__unavailable``: the columns whose value Debezium could not read (unchanged TOAST); their
  value is null and must be taken from the row's previous image, never written as data;
- ``__txn`` (source transaction id: ``transaction.id``, else PostgreSQL ``txId``, else MySQL
  ``gtid``), ``__source`` (the ``source`` struct), ``__topic``, ``__partition``, ``__offset``,
  ``__key`` (record key bytes).

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
from replay.decode_columns import converted_columns, row_columns
from replay.decode_position import event_position
from replay.decode_schema import CORRUPT, TopicSchema
from replay.decode_types import UnsupportedSchema
from replay.sinks.protocol import OP, OP_DELETE, OP_TRUNCATE, OP_UPSERT, POS
from replay.spark import Column, DataFrame, F, T

UNAVAILABLE = "__unavailable"
TXN, SOURCE = "__txn", "__source"
TOPIC, PARTITION, OFFSET, KEY = "__topic", "__partition", "__offset", "__key"
ERROR, VALUE = "__error", "__value"
DECODED_META = (OP, POS, UNAVAILABLE, TXN, SOURCE, TOPIC, PARTITION, OFFSET, KEY)
"""The meta columns of a decoded change frame, after the table's columns."""
BAD_COLUMNS = ("topic", "partition", "offset", "key", "value", "reason")
_OPS = ("c", "u", "d", "r", "t", "m")
_ENVELOPE_FIELDS = ("before", "after", "source", "op", "transaction")
_NULL_PAYLOAD = r'"payload"\s*:\s*null\s*\}\s*$'
_JSON_OPTIONS = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT}


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
"""``decode_native`` or ``decode_fallback.decode_python``."""


def _barrier() -> Column:
    """Always true, but nondeterministic: the optimizer then neither pushes a filter below the
    projection that holds it nor inlines it, so ``from_json`` and the error checks run once per
    record instead of once more in every filter on their results."""
    return F.spark_partition_id() >= 0


def _error_text(checks: list[tuple[Column, Column]]) -> Column:
    """The texts of the failed checks joined by ``; ``, null when all pass; the texts are
    built only for failing records (the conditions alone are cheap)."""
    failed = F.lit(False)
    for condition, _ in checks:
        failed = failed | F.coalesce(condition, F.lit(False))
    texts = F.array_compact(F.array(*(F.when(c, text) for c, text in checks)))
    return F.when(failed, F.array_join(texts, "; "))


def _envelopes(records: DataFrame, schema: TopicSchema, carry: Sequence[str]) -> DataFrame:
    """The parsed envelope parts as columns (references stay small for the column stage)."""
    text = F.when(_barrier(), F.col("value").cast("string"))
    v = F.from_json(text, schema.value_type(), _JSON_OPTIONS)
    parsed = records.where(F.col("value").isNotNull()).select(
        "topic", "partition", "offset", "key", "value", *carry, v.alias("v")
    )
    env = {n: F.coalesce(F.col("v.payload")[n], F.col("v")[n]) for n in _ENVELOPE_FIELDS}
    op, source = env["op"], env["source"]
    corrupt = F.col("v")[CORRUPT].isNotNull()
    null_payload = ~corrupt & op.isNull() & source.isNull() & text.rlike(_NULL_PAYLOAD)
    parts = [
        *(value.alias(f"__{name}") for name, value in env.items()),
        F.when(op == "d", env["before"]).otherwise(env["after"]).alias("__image"),
        corrupt.alias("__corrupt"),
    ]
    if schema.key:  # parsed only where the image lacks a key column (deletes without before)
        image = F.when(op == "d", env["before"]).otherwise(env["after"])
        lacking = F.lit(False)
        for column in schema.key:
            lacking = lacking | image[column.name].isNull()
        parsed_key = F.from_json(F.col("key").cast("string"), schema.key_type(), _JSON_OPTIONS)
        parts.append(F.when(lacking, parsed_key).alias("__kp"))
    kept = parsed.where(~null_payload & ~op.eqNullSafe("m"))
    return kept.select("topic", "partition", "offset", "key", "value", *carry, *parts)


def decode_native(records: DataFrame, schema: TopicSchema, carry: Sequence[str] = ()) -> Decoded:
    """Decode the change records of one topic (see the module doc); the ``carry`` columns of
    ``records`` are passed through after the meta columns. Raises ``UnsupportedSchema`` for a
    topic only the Python path reads (``schema.native`` false)."""
    if not schema.native:
        raise UnsupportedSchema("flat rows (ExtractNewRecordState) decode on the Python path")
    envelopes = _envelopes(records, schema, carry)
    op, source, image = F.col("__op"), F.col("__source"), F.col("__image")
    position = event_position(source, F.col("partition"), F.col("offset"), schema.connector)
    key = None
    if schema.key:
        fields = F.struct(*(F.col("__kp")[c.name].alias(c.name) for c in schema.key))
        key = F.coalesce(F.col("__kp.payload"), fields)
    converted = envelopes.select("*", *converted_columns(schema, image, key), position.alias(POS))
    where = F.when(op == "d", F.lit("payload.before")).otherwise(F.lit("payload.after"))
    row = row_columns(schema, image, where)
    is_change = op.isin("c", "u", "d", "r")
    checks = [
        (F.col("__corrupt"), F.lit("not a valid record")),
        *row.checks,
        (op.isNull(), F.lit("not a change event: payload.op is missing")),
        (~op.isin(*_OPS), F.lit("unknown op")),
        (op.isin("c", "u", "r") & F.col("__after").isNull(), F.lit("the op needs an after row")),
        ((op == "d") & F.col("__after").isNotNull(), F.lit("a delete has no after row")),
        (source["connector"].isNull(), F.lit("payload.source.connector is missing")),
        (F.col(POS).isNull(), F.lit("no source position (source fields missing)")),
        *(
            (is_change & row.values[n].isNull(), F.lit(f"key column {n} is null"))
            for n in schema.primary_key
        ),
    ]
    if schema.key:
        checks.append((F.col("__kp")[CORRUPT].isNotNull(), F.lit("the record key is not valid")))
    error = _error_text(checks)
    transaction = F.coalesce(
        F.col("__transaction")["id"],
        F.when(source["connector"] == "postgresql", source["txId"].cast("string")),
        source["gtid"],
    )
    no_columns = F.array().cast("array<string>")
    unavailable = F.array_compact(F.array(*row.unavailable)) if row.unavailable else no_columns
    decoded = converted.select(
        *(value.alias(name) for name, value in row.values.items()),
        F.when(op == "d", F.lit(OP_DELETE)).when(op == "t", F.lit(OP_TRUNCATE))
        .otherwise(F.lit(OP_UPSERT)).alias(OP),
        POS,
        F.when(op == "d", no_columns).otherwise(unavailable).alias(UNAVAILABLE),
        transaction.alias(TXN),
        source.alias(SOURCE),
        F.col("topic").alias(TOPIC), F.col("partition").alias(PARTITION),
        F.col("offset").alias(OFFSET), F.col("key").alias(KEY),
        F.when(_barrier(), error).alias(ERROR),
        F.col("value").alias(VALUE),
        *carry,
    )  # fmt: skip
    return Decoded(decoded, schema)


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


def explain_bad(rejected: DataFrame, table: TableSpec | None) -> DataFrame:
    """``BAD_COLUMNS`` of rejected decoded rows; the parser's own message where it has one."""
    explain = _explainer(table)
    parser_reason = explain(F.col(VALUE), F.col(KEY), F.col(TOPIC), F.col(PARTITION), F.col(OFFSET))
    corrupt = F.col(ERROR).startswith("not a valid record")
    reason = F.when(corrupt, parser_reason)
    return rejected.select(
        F.col(TOPIC).alias("topic"),
        F.col(PARTITION).alias("partition"),
        F.col(OFFSET).alias("offset"),
        F.col(KEY).alias("key"),
        F.col(VALUE).alias("value"),
        F.when(reason.startswith("the Python parser"), F.concat_ws(": ", F.col(ERROR), reason))
        .otherwise(F.coalesce(reason, F.col(ERROR)))
        .alias("reason"),
    )
