"""The column expressions of the native decoder's projections, built once per topic schema.

Building them costs thousands of calls into the JVM, so they are kept (per schema object and
Spark session) and reused for every batch of the topic. The stages: ``parsed`` (``from_json`` of
the value), ``envelope`` (the envelope parts as columns, the record key parsed only where the
row image lacks a key column), ``steps`` (the conversions in steps, e.g. decimals: one
projection each), ``converted`` (``columns``, and ``__pos``) and ``decoded`` (the decoded
frame's columns, see ``decode``).
"""

from __future__ import annotations

from dataclasses import dataclass

from replay.decode.columns import converted_columns, row_columns, step_columns
from replay.decode.position import event_position
from replay.decode.schema import CORRUPT, TopicSchema
from replay.expression_cache import ExpressionCache
from replay.sinks.protocol import OP, OP_DELETE, OP_TRUNCATE, OP_UPSERT, POS
from replay.spark import Column, F

UNAVAILABLE = "__unavailable"
TXN, SOURCE = "__txn", "__source"
TOPIC, PARTITION, OFFSET, KEY = "__topic", "__partition", "__offset", "__key"
ERROR, VALUE = "__error", "__value"
_OPS = ("c", "u", "d", "r", "t", "m")
_ENVELOPE_FIELDS = ("before", "after", "source", "op", "transaction")
_NULL_PAYLOAD = r'"payload"\s*:\s*null\s*\}\s*$'
_JSON_OPTIONS = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT}
_CACHE_SIZE = 32


@dataclass(frozen=True)
class Stages:
    """The expressions of each projection (and the filter between the first two)."""

    parsed: Column
    keep: Column
    envelope: list[Column]
    steps: list[list[Column]]
    converted: list[Column]
    decoded: list[Column]


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


def _envelope(schema: TopicSchema) -> tuple[Column, Column, list[Column]]:
    """(the parsed value, the filter of records to decode, the envelope columns)."""
    text = F.col("value").cast("string")
    if schema.value_prefix:  # parse the payload alone: the same object without its schema
        head = schema.value_prefix
        # Cut by bytes (a substring of text counts its characters from the start).
        rest = F.substring(F.col("value"), len(head.encode()) + 1, 2**31 - 1)
        cut = F.concat(F.lit(bytearray(b'{"payload":')), rest).cast("string")
        text = F.when(text.startswith(head), cut).otherwise(text)
    text = F.when(_barrier(), text)
    parsed = F.from_json(text, schema.value_type(), _JSON_OPTIONS).alias("v")
    env = {n: F.coalesce(F.col("v.payload")[n], F.col("v")[n]) for n in _ENVELOPE_FIELDS}
    op, source = env["op"], env["source"]
    corrupt = F.col("v")[CORRUPT].isNotNull()
    null_payload = ~corrupt & op.isNull() & source.isNull() & text.rlike(_NULL_PAYLOAD)
    image = F.when(op == "d", env["before"]).otherwise(env["after"])
    parts = [
        *(value.alias(f"__{name}") for name, value in env.items()),
        image.alias("__image"),
        corrupt.alias("__corrupt"),
    ]
    if schema.key:
        lacking = F.lit(False)
        for column in schema.key:
            lacking = lacking | image[column.name].isNull()
        parsed_key = F.from_json(F.col("key").cast("string"), schema.key_type(), _JSON_OPTIONS)
        parts.append(F.when(lacking, parsed_key).alias("__kp"))
    return parsed, ~null_payload & ~op.eqNullSafe("m"), parts


def _stages(schema: TopicSchema) -> Stages:
    parsed, keep, envelope = _envelope(schema)
    op, source, image = F.col("__op"), F.col("__source"), F.col("__image")
    position = event_position(source, F.col("partition"), F.col("offset"), schema.connector)
    key = None
    if schema.key:
        fields = F.struct(*(F.col("__kp")[c.name].alias(c.name) for c in schema.key))
        key = F.coalesce(F.col("__kp.payload"), fields)
    steps = step_columns(schema, image, key)
    converted = [*converted_columns(schema, image, key), position.alias(POS)]
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
    # Debezium's PostgreSQL transaction.id is "<txId>:<the event's own LSN>": one transaction,
    # many ids; the txId before the colon names the transaction.
    postgresql = source["connector"] == "postgresql"
    declared = F.col("__transaction")["id"]
    transaction = F.coalesce(
        F.when(postgresql, F.substring_index(declared, ":", 1)).otherwise(declared),
        F.when(postgresql, source["txId"].cast("string")),
        source["gtid"],
    )
    no_columns = F.array().cast("array<string>")
    unavailable = F.array_compact(F.array(*row.unavailable)) if row.unavailable else no_columns
    decoded = [
        *(value.alias(name) for name, value in row.values.items()),
        F.when(op == "d", F.lit(OP_DELETE)).when(op == "t", F.lit(OP_TRUNCATE))
        .otherwise(F.lit(OP_UPSERT)).alias(OP),
        F.col(POS),
        F.when(op == "d", no_columns).otherwise(unavailable).alias(UNAVAILABLE),
        transaction.alias(TXN),
        source.alias(SOURCE),
        F.col("topic").alias(TOPIC), F.col("partition").alias(PARTITION),
        F.col("offset").alias(OFFSET), F.col("key").alias(KEY),
        F.when(_barrier(), _error_text(checks)).alias(ERROR),
        F.col("value").alias(VALUE),
    ]  # fmt: skip
    return Stages(parsed, keep, envelope, steps, converted, decoded)


_cache: ExpressionCache[Stages] = ExpressionCache(_CACHE_SIZE)


def decode_stages(schema: TopicSchema) -> Stages:
    """The stage expressions of ``schema`` for the active Spark session (built once)."""
    return _cache.get(schema, None, lambda: _stages(schema))
