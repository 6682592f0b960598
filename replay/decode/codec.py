"""A Connect type's codec: what ``from_json`` reads, the decoded Spark type, the conversion
between them on the JVM (whole, or in steps a decoder runs as projections of their own), the
same conversion for the Python fallback path, and Debezium's unavailable-value placeholder.
``connect_types.compile_codec`` makes them from Connect schemas."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cdc.errors import UserError
from cdc.events.unavailable import PLACEHOLDER_BASE64, PLACEHOLDER_TEXT
from replay.decode.decimals import Step, staged
from replay.spark import Column, F, T

Convert = Callable[[Column], Column]
ToPython = Callable[[Any], Any]


class UnsupportedSchema(UserError, ValueError):
    """A Connect schema the native decoder cannot map to Spark types."""


def _same(value: Any) -> Any:
    return value


def same_column(column: Column) -> Column:
    """The column itself (a conversion that changes nothing)."""
    return column


@dataclass(frozen=True)
class Codec:
    """One Connect type: ``raw`` is what ``from_json`` reads, ``spark`` the decoded type."""

    raw: T.DataType
    spark: T.DataType
    convert: Convert = same_column
    """Raw column to decoded column; null for a non-null raw value that does not convert."""
    to_python: ToPython = _same
    """The ``cdc.events`` parser's value to the value Spark takes for ``spark``."""
    fallible: bool = False
    physical: str = ""
    steps: tuple[Step, ...] = ()
    """``convert`` in steps (``decimals.staged``), which a decoder may run as projections."""
    finish: Step | None = None
    """With ``steps``: the decoded column from ``[raw, each step's value]``."""

    @classmethod
    def in_steps(
        cls, raw: T.DataType, spark: T.DataType, steps: tuple[Step, ...], finish: Step,
        to_python: ToPython, physical: str = "",
    ) -> Codec:  # fmt: skip
        """A fallible codec whose conversion comes in ``steps``; ``convert`` runs them inline."""
        convert: Convert = lambda c: staged(c, steps, finish)  # noqa: E731
        return cls(raw, spark, convert, to_python, True, physical, steps, finish)

    def invalid(self, raw: Column, converted: Column) -> Column:
        """True where a non-null raw value did not convert."""
        if not self.fallible:
            return F.lit(False)
        if isinstance(self.raw, T.ArrayType):
            present: Callable[[Column], Column] = lambda item: item.isNotNull()  # noqa: E731
            return F.size(F.filter(raw, present)) != F.size(F.filter(converted, present))
        return raw.isNotNull() & converted.isNull()

    @property
    def may_be_unavailable(self) -> bool:
        """Whether a value of this type can be Debezium's unavailable-value placeholder."""
        if isinstance(self.raw, T.ArrayType):
            return isinstance(self.raw.elementType, T.StringType | T.IntegralType)
        if self.physical in ("string", "map"):
            return True
        return self.physical == "bytes" and isinstance(self.raw, T.StringType)

    def placeholder(self, raw: Column) -> Column | None:
        """True where ``raw`` is Debezium's unavailable-value placeholder (None: never)."""
        if self.physical == "string":
            return raw == F.lit(PLACEHOLDER_TEXT)
        if self.physical == "bytes" and isinstance(self.raw, T.StringType):
            return raw == F.lit(PLACEHOLDER_BASE64)
        if isinstance(self.raw, T.ArrayType) and isinstance(self.raw.elementType, T.StringType):
            return raw == F.array(F.lit(PLACEHOLDER_TEXT))
        if isinstance(self.raw, T.ArrayType) and isinstance(self.raw.elementType, T.IntegralType):
            placeholder_bytes = [F.lit(b) for b in PLACEHOLDER_TEXT.encode()]
            return raw == F.array(*placeholder_bytes).cast(self.raw)
        if isinstance(self.raw, T.MapType):
            entry = F.try_element_at(raw, F.lit(PLACEHOLDER_TEXT))
            return (F.size(raw) == 1) & (entry == F.lit(PLACEHOLDER_TEXT))
        return None
