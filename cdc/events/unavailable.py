"""The value Debezium sends for a column it could not read (unchanged PostgreSQL TOAST values).

Debezium writes ``__debezium_unavailable_value`` (the ``unavailable.value.placeholder``) in the
column's own type: as text, as base64 bytes, as a one-element text array, as an int array of the
placeholder's bytes, or as a one-entry hstore map. Every form decodes to ``UNAVAILABLE``, which
means "this column's value is unknown: keep the value the row had before". It is never written
back as data: the writer rejects it.
"""

from __future__ import annotations

import base64
import enum
from collections.abc import Mapping
from typing import Any, Final

from cdc.errors import ChangeEventError

PLACEHOLDER_TEXT: Final = "__debezium_unavailable_value"
PLACEHOLDER_BASE64: Final = base64.b64encode(PLACEHOLDER_TEXT.encode()).decode("ascii")
PLACEHOLDER_TEXT_ARRAY: Final = [PLACEHOLDER_TEXT]
PLACEHOLDER_INT_ARRAY: Final = list(PLACEHOLDER_TEXT.encode())
PLACEHOLDER_HSTORE: Final = {PLACEHOLDER_TEXT: PLACEHOLDER_TEXT}


class Unavailable(enum.Enum):
    """The type of ``UNAVAILABLE``; test with ``value is UNAVAILABLE``."""

    UNAVAILABLE = "UNAVAILABLE"

    def __repr__(self) -> str:
        return "UNAVAILABLE"


UNAVAILABLE: Final = Unavailable.UNAVAILABLE


def is_placeholder(value: object) -> bool:
    """True when ``value`` (a column value as JSON gives it) is one of the placeholder forms."""
    kind = type(value)
    if kind is str:
        return value in (PLACEHOLDER_TEXT, PLACEHOLDER_BASE64)
    if kind is list:
        return value in (PLACEHOLDER_TEXT_ARRAY, PLACEHOLDER_INT_ARRAY)
    return kind is dict and value == PLACEHOLDER_HSTORE


def mark_unavailable(row: dict[str, Any]) -> dict[str, Any]:
    """Replace placeholder column values of a schemaless row by ``UNAVAILABLE``, in place."""
    for name, value in row.items():
        if value is not None and is_placeholder(value):
            row[name] = UNAVAILABLE
    return row


def unavailable_columns(row: Mapping[str, object] | None) -> frozenset[str]:
    """Names of the columns of ``row`` whose value is ``UNAVAILABLE``."""
    if not row:
        return frozenset()
    return frozenset(name for name, value in row.items() if value is UNAVAILABLE)


def fill_unavailable(row: Mapping[str, Any], previous: Mapping[str, Any] | None) -> dict[str, Any]:
    """``row`` with each ``UNAVAILABLE`` column taken from ``previous`` (the stored row).

    Raises ``ChangeEventError`` naming the column when there is no previous value to keep.
    """
    filled = dict(row)
    for name, value in row.items():
        if value is not UNAVAILABLE:
            continue
        if previous is None or name not in previous or previous[name] is UNAVAILABLE:
            raise ChangeEventError(
                "value unavailable (unchanged TOAST column) and no previous value to keep",
                field=name,
            )
        filled[name] = previous[name]
    return filled
