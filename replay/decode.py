"""Raw change records to typed change rows, decoded on the JVM with ``from_json``.

``decode_native(records, schema)`` reads the RAW_SCHEMA columns of ``replay.sources`` and returns
``Decoded(good, bad)``. ``good`` holds one row per change event: the table's columns (decoded
types, see ``decode_types``) and

- ``__op``: ``u`` (c/u/r), ``d`` (delete: the ``before`` image, key columns filled from the
  record key), or ``t`` (truncate: null columns); logical messages (``m``) are left out;
- ``__pos``: the ordering text of ``decode_position``;
- ``__unavailable``: the columns whose value Debezium could not read (unchanged TOAST); their
  value is null and must be taken from the row's previous image, never written as data;
- ``__txn`` (source transaction id: ``transaction.id``, else PostgreSQL ``txId``, else MySQL
  ``gtid``), ``__source`` (the ``source`` struct), ``__topic``, ``__partition``, ``__offset``,
  ``__key`` (record key bytes).

``bad`` holds the records that are not valid JSON or not valid change events (topic, partition,
offset, key, value, reason), for the engine's ``--on-error`` policy; the reason of a record that
does not parse comes from the ``cdc.events`` parser. Tombstones (null values, null payloads) are
in neither. ``good`` and ``bad`` share one plan: persist ``Decoded.all`` to decode once for both.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from cdc.errors import ChangeEventError
from cdc.events.columns import TableSpec
from cdc.events.reader import ChangeEventReader
from replay.decode_position import event_position
from replay.decode_schema import CORRUPT, ColumnSpec, TopicSchema
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


def _check(condition: Column, reason: str) -> Column:
    return F.when(condition, F.lit(reason))


def _column(
    spec: ColumnSpec, image: Column, key: Column | None, where: Column
) -> tuple[Column, Column | None, list[Column]]:
    """(value, unavailable flag, error checks) of one column of the row image ``where``."""
    raw = in_image = image[spec.name]
    if key is not None:
        raw = F.coalesce(in_image, key[spec.name])
    codec = spec.codec
    placeholder = codec.placeholder(raw)
    converted = codec.convert(raw)
    default = None
    if spec.default is not None and not isinstance(spec.default, dict | list):
        default = codec.convert(F.lit(spec.default).try_cast(codec.raw))
    value = F.when(raw.isNull(), default)
    if placeholder is not None:
        value = value.when(placeholder, F.lit(None))
    value = value.otherwise(converted).cast(codec.spark)
    checks = []
    if not spec.optional and default is None:
        required = image.isNotNull() & in_image.isNull()
        checks.append(F.when(required, F.concat(where, F.lit(f".{spec.name}: required, null"))))
    if codec.fallible:
        bad = codec.invalid(raw, converted)
        if placeholder is not None:
            bad = bad & ~F.coalesce(placeholder, F.lit(False))
        checks.append(F.when(bad, F.concat(where, F.lit(f".{spec.name}: invalid value"))))
    return value, placeholder, checks


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
    if schema.key:
        k = F.from_json(F.col("key").cast("string"), schema.key_type(), _JSON_OPTIONS)
        fields = F.struct(*(k[c.name].alias(c.name) for c in schema.key))
        parts += [F.coalesce(k["payload"], fields).alias("__k"), k[CORRUPT].alias("__bad_key")]
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
    key = F.col("__k") if schema.key else None
    keys = set(schema.primary_key)
    where = F.when(op == "d", F.lit("payload.before")).otherwise(F.lit("payload.after"))
    values: dict[str, Column] = {}
    flags, checks = [], []
    for spec in schema.columns:
        value, flag, found = _column(spec, image, key if spec.name in keys else None, where)
        values[spec.name] = value
        checks += found
        if flag is not None:
            flags.append(F.when(F.coalesce(flag, F.lit(False)), F.lit(spec.name)))
    is_change = op.isin("c", "u", "d", "r")
    checks += [
        _check(op.isNull(), "not a change event: payload.op is missing"),
        _check(~op.isin(*_OPS), "unknown op"),
        _check(op.isin("c", "u", "r") & F.col("__after").isNull(), "the op needs an after row"),
        _check((op == "d") & F.col("__after").isNotNull(), "a delete has no after row"),
        _check(source["connector"].isNull(), "payload.source.connector is missing"),
        *(_check(is_change & values[n].isNull(), f"key column {n} is null") for n in keys),
    ]
    if schema.key:
        checks.append(_check(F.col("__bad_key").isNotNull(), "the record key is not valid"))
    position = event_position(source, F.col("partition"), F.col("offset"), schema.connector)
    checks.append(_check(position.isNull(), "no source position (source fields missing)"))
    errors = F.array_compact(F.array(_check(F.col("__corrupt"), "not a valid record"), *checks))
    transaction = F.coalesce(
        F.col("__transaction")["id"],
        F.when(source["connector"] == "postgresql", source["txId"].cast("string")),
        source["gtid"],
    )
    no_columns = F.array().cast("array<string>")
    unavailable = F.array_compact(F.array(*flags)) if flags else no_columns
    decoded = envelopes.select(
        *(value.alias(name) for name, value in values.items()),
        F.when(op == "d", F.lit(OP_DELETE)).when(op == "t", F.lit(OP_TRUNCATE))
        .otherwise(F.lit(OP_UPSERT)).alias(OP),
        position.alias(POS),
        F.when(op == "d", no_columns).otherwise(unavailable).alias(UNAVAILABLE),
        transaction.alias(TXN),
        source.alias(SOURCE),
        F.col("topic").alias(TOPIC), F.col("partition").alias(PARTITION),
        F.col("offset").alias(OFFSET), F.col("key").alias(KEY),
        F.when(_barrier() & (F.size(errors) > 0), F.array_join(errors, "; ")).alias(ERROR),
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
