"""Schema changes mid-stream: every record decoded by its own Connect schema.

A table captured while it changes (``ALTER TABLE``) has records of several schemas in one topic.
``find_versions`` lists the distinct schemas of a range of records (``replay.decode.version_scan``);
``versioned_schema`` builds the topic's decoding plan from them: the columns of the newest schema in
the range (a point-in-time cut has the columns the table had at the cut), each with a type that
holds every version's values, and the schema of each version to decode its own records
(``decode_native`` splits by version). Rules:

- a column a record's schema lacks reads the default it was added with (``ADD COLUMN ... NOT
  NULL DEFAULT x``: the database filled its rows without change events), else NULL;
- a widening (``int`` -> ``bigint``, a decimal gaining scale or digits, ``real`` -> ``double``)
  reads older values exactly in the new type;
- a narrowing or incompatible change stops the run naming topic, column, both types and where
  the change is, unless ``allow_rewrite``: older values are then cast to the new type, as the
  database rewrote them (a value that does not cast is a bad record);
- a column dropped from the newest schema is not in the table.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from cdc.errors import UserError
from replay.decode.codec import UnsupportedSchema
from replay.decode.schema import ColumnSpec, TopicSchema, remember
from replay.decode.version_scan import SchemaVersion, find_versions, schema_hash
from replay.reading.sources import whole_value
from replay.spark import Column, DataFrame, F, SparkSession, T, quoted_name


class SchemaChangeError(UserError):
    """A column changed type in a way a mirror cannot follow exactly."""


_known_plans: OrderedDict[tuple[Any, ...], tuple[Any, TopicSchema]] = OrderedDict()
"""The plans built before (keyed by object ids; the values hold the keyed objects)."""


def schema_in_range(
    topic: str, records: Callable[[], DataFrame], base: TopicSchema, *,
    up_to_cut: Callable[[], DataFrame] | None = None,
    allow_rewrite: bool = False, rows: Sequence[Sequence[Any]] | None = None,
) -> TopicSchema:  # fmt: skip
    """How the ``records()`` (a range of ``topic``) decode, given ``base`` from its newest record:
    ``base`` itself for declared (schemaless) and flat topics, else by ``versioned_schema``;
    ``up_to_cut()``: the records at or before a point-in-time cut, whose newest schema gives the
    table's columns (later versions still decode, to place their events after the cut);
    ``rows``: the records on the driver, when it read them (see ``version_scan``)."""
    if not base.versioned:
        return base
    numeric = any(isinstance(c.codec.raw, T.DecimalType) for c in base.columns)
    versions = find_versions(records, base, numeric_decimals=numeric, rows=rows)
    before = None
    if up_to_cut is not None and len(versions) > 1:
        upto = up_to_cut()
        seen = upto.select(schema_hash(whole_value(upto)).alias("h")).distinct().collect()
        before = frozenset(int(row["h"]) for row in seen)
    return versioned_schema(topic, base, versions, allow_rewrite=allow_rewrite, before=before)


def versioned_schema(
    topic: str, base: TopicSchema, versions: Sequence[SchemaVersion], *,
    allow_rewrite: bool = False, before: frozenset[int] | None = None,
) -> TopicSchema:  # fmt: skip
    """The range's schema when its records have one (``base`` when none has a schema); else
    the plan described in the module doc. ``before``: the hashes seen at or before a cut; only
    those versions shape the table, the others decode leniently (their events are after it)."""
    if not versions:
        return base
    if len(versions) == 1:  # the range's own schema, which may be older than the topic's newest
        return versions[0].schema
    parts = (base, *(v.schema for v in versions))
    key = (*(id(p) for p in parts), *(v.hash for v in versions), allow_rewrite, before)
    known = _known_plans.get(key)
    if known is not None and all(a is b for a, b in zip(known[0], parts, strict=True)):
        return known[1]
    plan = _unified(topic, base, versions, allow_rewrite=allow_rewrite, before=before)
    remember(_known_plans, key, (parts, plan))
    return plan


def _unified(
    topic: str, base: TopicSchema, versions: Sequence[SchemaVersion], *, allow_rewrite: bool,
    before: frozenset[int] | None,
) -> TopicSchema:  # fmt: skip
    shaping = [v for v in versions if before is None or v.hash in before] or list(versions)
    newest = shaping[-1]
    columns = []
    for column in newest.schema.columns:
        target = column.codec.spark
        default = None
        for version in shaping[:-1]:
            old = {c.name: c for c in version.schema.columns}.get(column.name)
            if old is None:
                continue
            target = _common(topic, column.name, old.codec.spark, target, version, allow_rewrite)
        for version in shaping:  # the default of the first version that has the column
            found = {c.name: c for c in version.schema.columns}.get(column.name)
            if found is not None:
                default = found
                break
        codec = replace(column.codec, spark=target)
        columns.append(ColumnSpec(column.name, codec, column.optional,
                                  None if default is None else default.default))  # fmt: skip
    parts = tuple((v.hash, v.schema, v in shaping) for v in versions)
    return replace(newest.schema, columns=tuple(columns), versions=parts, key=base.key)


def _common(
    topic: str, name: str, old: T.DataType, new: T.DataType, at: SchemaVersion, rewrite: bool
) -> T.DataType:
    """The type holding ``old`` and ``new`` values, or ``new`` when a rewrite is allowed."""
    if old == new:
        return new
    widened = _widened(old, new)
    if widened is not None:
        return widened
    if rewrite:
        return new
    raise SchemaChangeError(
        f"topic {topic}: column {name} changed from {old.simpleString()} to "
        f"{new.simpleString()} after {at.last}: not a widening, so the database rewrote its "
        "rows without change events and a mirror cannot follow exactly; replay with "
        "--allow-type-rewrite to cast the older values to the new type"
    )


_INTEGRAL_DIGITS = {"tinyint": 3, "smallint": 5, "int": 10, "bigint": 19}
_INTEGRAL_ORDER = ("tinyint", "smallint", "int", "bigint")


def _widened(old: T.DataType, new: T.DataType) -> T.DataType | None:
    old_name, new_name = old.simpleString(), new.simpleString()
    if old_name in _INTEGRAL_ORDER and new_name in _INTEGRAL_ORDER:
        return new if _INTEGRAL_ORDER.index(new_name) >= _INTEGRAL_ORDER.index(old_name) else None
    if isinstance(new, T.DoubleType) and isinstance(old, T.FloatType | T.IntegralType):
        return new
    if isinstance(new, T.DecimalType):
        if old_name in _INTEGRAL_DIGITS:
            old = T.DecimalType(_INTEGRAL_DIGITS[old_name], 0)
        if not isinstance(old, T.DecimalType):
            return None
        if new.scale < old.scale:
            return None
        if new.precision - new.scale < old.precision - old.scale and new.precision < 38:
            return None  # fewer integer digits; at 38 the precision was unknown or capped
        return new
    return None


def aligned(
    version: TopicSchema, unified: TopicSchema, strict: bool = True
) -> tuple[list[Column], Column]:
    """The unified table columns of a frame decoded by ``version`` (cast to the unified type,
    or the column's default, else NULL, where the version lacks it), and the error text of a
    rewritten value that does not cast (null where none; always with ``strict`` false)."""
    own = {c.name: c for c in version.columns}
    out, errors = [], []
    for column in unified.columns:
        target = column.codec.spark
        mine = own.get(column.name)
        if mine is None:
            out.append(_default_of(column).cast(target).alias(column.name))
            continue
        value = F.col(quoted_name(column.name))
        cast = value.try_cast(target)
        out.append(cast.alias(column.name))
        if strict and mine.codec.spark != target:  # a widening past Spark's 38 digits too
            text = f"{column.name}: {mine.codec.spark.simpleString()} value does not cast to "
            errors.append(F.when(value.isNotNull() & cast.isNull(),
                                 F.lit(text + target.simpleString())))  # fmt: skip
    return out, F.coalesce(*errors) if errors else F.lit(None).cast("string")


def retyped_columns(schema: TopicSchema) -> dict[str, list[str]]:
    """The columns whose type differs between the schema versions that shape the table, with
    their types in order (a projection over such a column must not mix them silently)."""
    found: dict[str, list[str]] = {}
    for _, version, shaping in schema.versions:
        if not shaping:
            continue
        for column in version.columns:
            kind = column.codec.spark.simpleString()
            seen = found.setdefault(column.name, [])
            if not seen or seen[-1] != kind:
                seen.append(kind)
    return {name: kinds for name, kinds in found.items() if len(kinds) > 1}


def column_defaults(spark: SparkSession, schema: TopicSchema) -> dict[str, Any]:
    """The decoded default of each column that has one, when the range has schema versions
    (what a sink fills an added column's existing rows with); empty otherwise."""
    if not schema.versions:
        return {}
    having = [c for c in schema.columns if c.default is not None]
    if not having:
        return {}
    values = [_default_of(c).cast(c.codec.spark).alias(c.name) for c in having]
    row = spark.range(1).select(*values).first()
    return {} if row is None else {k: v for k, v in row.asDict().items() if v is not None}


def _default_of(column: ColumnSpec) -> Column:
    if column.default is None or isinstance(column.default, Mapping | list):
        return F.lit(None)
    raw: Any = column.default
    return column.codec.convert(F.lit(raw).try_cast(column.codec.raw))


__all__ = [
    "SchemaChangeError", "SchemaVersion", "UnsupportedSchema", "aligned", "column_defaults",
    "find_versions", "retyped_columns", "schema_hash", "schema_in_range", "versioned_schema",
]  # fmt: skip
