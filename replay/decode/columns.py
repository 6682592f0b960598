"""The row columns of the native decoder, in two projections.

The first projection converts each column's raw value (``connect_types``) into its own column,
with the unavailable-placeholder flag; the second picks the value (default, null for the
placeholder, else the converted value) and writes the error checks. The converted value is used
twice (value and check), so the optimizer keeps the first projection apart instead of inlining
it, and each conversion runs once per record (a conditional branch is not shared otherwise).
A conversion that comes in steps (decimals) runs its steps in projections before the first
(``step_columns``), for the same reason: each step reads the one before several times.
"""

from __future__ import annotations

from dataclasses import dataclass

from replay.decode.schema import ColumnSpec, TopicSchema
from replay.spark import Column, F


@dataclass(frozen=True)
class RowColumns:
    """The second projection's expressions: values by column name, the names of unavailable
    columns (null where available), and the error checks (condition, text)."""

    values: dict[str, Column]
    unavailable: list[Column]
    checks: list[tuple[Column, Column]]


def _names(index: int) -> tuple[str, str, str, str]:
    return f"__raw{index}", f"__in{index}", f"__conv{index}", f"__ph{index}"


def _raw(schema: TopicSchema, spec: ColumnSpec, image: Column, key: Column | None) -> Column:
    """A column's raw value: the image's, for a key column filled from the record key."""
    if key is not None and spec.name in schema.primary_key:
        return F.coalesce(image[spec.name], key[spec.name])
    return image[spec.name]


def step_columns(schema: TopicSchema, image: Column, key: Column | None) -> list[list[Column]]:
    """The projections before the first: the values of the conversions that come in steps
    (``Codec.steps``), one projection per step, each reading the step before as a column."""
    levels: list[list[Column]] = []
    for index, spec in enumerate(schema.columns):
        parts = [_raw(schema, spec, image, key)]
        for level, step in enumerate(spec.codec.steps):
            if level == len(levels):
                levels.append([])
            levels[level].append(step(parts).alias(_step_name(index, level)))
            parts.append(F.col(_step_name(index, level)))
    return levels


def _step_name(index: int, level: int) -> str:
    return f"__step{index}_{level}"


def converted_columns(schema: TopicSchema, image: Column, key: Column | None) -> list[Column]:
    """The first projection: per column the raw value (key-filled for key columns), the image's
    own value, the converted value (from ``step_columns`` where it comes in steps) and the
    placeholder flag."""
    out = []
    for index, spec in enumerate(schema.columns):
        raw_name, in_name, conv_name, ph_name = _names(index)
        in_image = image[spec.name]
        raw = _raw(schema, spec, image, key)
        codec = spec.codec
        placeholder = codec.placeholder(raw)
        if codec.steps and codec.finish is not None:
            steps = [F.col(_step_name(index, level)) for level in range(len(codec.steps))]
            converted = codec.finish([raw, *steps])
        else:
            converted = codec.convert(raw)
        out += [raw.alias(raw_name), in_image.alias(in_name), converted.alias(conv_name)]
        if placeholder is not None:
            out.append(F.coalesce(placeholder, F.lit(False)).alias(ph_name))
    return out


def _default(spec: ColumnSpec) -> Column | None:
    if spec.default is None or isinstance(spec.default, dict | list):
        return None
    return spec.codec.convert(F.lit(spec.default).try_cast(spec.codec.raw))


def row_columns(schema: TopicSchema, image: Column, where: Column) -> RowColumns:
    """The second projection over ``converted_columns`` (``where``: the image's path text)."""
    values: dict[str, Column] = {}
    unavailable, checks = [], []
    for index, spec in enumerate(schema.columns):
        raw_name, in_name, conv_name, ph_name = _names(index)
        raw, converted, codec = F.col(raw_name), F.col(conv_name), spec.codec
        placeholder = F.col(ph_name) if codec.placeholder(raw) is not None else None
        default = _default(spec)
        value = F.when(raw.isNull(), default)
        if placeholder is not None:
            value = value.when(placeholder, F.lit(None))
            unavailable.append(F.when(placeholder, F.lit(spec.name)))
        values[spec.name] = value.otherwise(converted).cast(codec.spark)
        if not spec.optional and default is None:
            required = image.isNotNull() & F.col(in_name).isNull()
            checks.append((required, F.concat(where, F.lit(f".{spec.name}: required, null"))))
        if codec.fallible:
            bad = codec.invalid(raw, converted)
            if placeholder is not None:
                bad = bad & ~placeholder
            checks.append((bad, F.concat(where, F.lit(f".{spec.name}: invalid value"))))
    return RowColumns(values, unavailable, checks)
