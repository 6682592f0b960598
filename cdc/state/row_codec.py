"""Column types of state tables: value checks and the compact JSON encoding of rows.

A row is stored as a compact JSON object of its non-null columns; every type round-trips
exactly: ``Decimal`` as its string (scale kept), ``date``/``datetime`` as ISO 8601 (an aware
datetime keeps its UTC offset; a named zone becomes that fixed offset), ``bytes`` as base64,
floats by their shortest repr (NaN and infinities included), ``dict``/``list`` as JSON.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Callable, Mapping
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from cdc import json_bytes
from cdc.errors import ChangeEventError


def _check_float(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError
    return float(value)


def _check_decimal(value: object) -> Decimal:
    if isinstance(value, Decimal):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return Decimal(value)
    raise TypeError


def _check_bytes(value: object) -> bytes:
    if not isinstance(value, bytes | bytearray | memoryview):
        raise TypeError
    return bytes(value)


def _check_json(shape: type) -> Callable[[object], Any]:
    def check(value: object) -> Any:
        if not isinstance(value, shape):
            raise TypeError
        try:
            copy = json.loads(json.dumps(value, allow_nan=False))
        except (TypeError, ValueError) as exc:
            raise TypeError from exc
        if copy != value:  # e.g. tuples or int dict keys: would not read back as written
            raise TypeError
        return copy

    return check


def _exact(tp: type, *, refuse: type | None = None) -> Callable[[object], Any]:
    def check(value: object) -> Any:
        if not isinstance(value, tp) or (refuse is not None and isinstance(value, refuse)):
            raise TypeError
        return value

    return check


_CHECKS: dict[type, Callable[[object], Any]] = {
    int: _exact(int, refuse=bool),
    float: _check_float,
    str: _exact(str),
    bool: _exact(bool),
    Decimal: _check_decimal,
    date: _exact(date, refuse=datetime),
    datetime: _exact(datetime),
    bytes: _check_bytes,
    dict: _check_json(dict),
    list: _check_json(list),
}

_NAMES: dict[type, str] = {dict: "a JSON object (dict)", list: "a JSON array (list)"}

COLUMN_TYPES: frozenset[type] = frozenset(_CHECKS)
"""The python types a state-table column may declare."""


def value_check(tp: type) -> Callable[[object], Any]:
    """The check of a ``tp`` column: the stored value, or ``TypeError`` (see ``check_value``)."""
    return _CHECKS[tp]


def check_value(tp: type, value: object, *, table: str, column: str) -> Any:
    """``value`` as stored in a ``tp`` column (ints widen to float/Decimal), or ChangeEventError."""
    try:
        return _CHECKS[tp](value)
    except TypeError:
        raise ChangeEventError(
            f"table {table}: expected {_NAMES.get(tp, tp.__name__)}, "
            f"got {type(value).__name__} {value!r:.80}",
            field=column,
        ) from None


def _float_to_json(x: float) -> Any:
    return x if math.isfinite(x) else repr(x)


_TO_JSON: dict[type, Callable[[Any], Any]] = {
    float: _float_to_json,
    Decimal: str,
    date: date.isoformat,
    datetime: datetime.isoformat,
    bytes: lambda b: base64.b64encode(b).decode("ascii"),
}
_FROM_JSON: dict[type, Callable[[Any], Any]] = {
    float: float,
    Decimal: Decimal,
    date: date.fromisoformat,
    datetime: datetime.fromisoformat,
    bytes: lambda s: base64.b64decode(s, validate=True),
}


RowPlan = tuple[tuple[str, type, Callable[[Any], Any] | None, Callable[[Any], Any] | None], ...]
"""Per column: name, type, to-JSON and from-JSON conversion (None: the value as it is)."""


def row_plan(columns: Mapping[str, type]) -> RowPlan:
    """The conversions of ``columns``, looked up once per table rather than per row."""
    return tuple((name, tp, _TO_JSON.get(tp), _FROM_JSON.get(tp)) for name, tp in columns.items())


def encode_row(columns: Mapping[str, type], row: Mapping[str, Any]) -> bytes:
    """Encode a checked row (absent or None columns are left out)."""
    return encode_planned(row_plan(columns), row)


def encode_planned(plan: RowPlan, row: Mapping[str, Any]) -> bytes:
    """``encode_row`` with the conversions of ``row_plan``."""
    doc = {}
    for name, _, to_json, _ in plan:
        value = row.get(name)
        if value is not None:
            doc[name] = value if to_json is None else to_json(value)
    return json_bytes.dumps(doc, "surrogatepass")


def decode_row(columns: Mapping[str, type], data: bytes, *, table: str) -> dict[str, Any]:
    """Decode a row made by ``encode_row``; columns not stored are None, unknown ones ignored."""
    return decode_planned(row_plan(columns), data, table=table)


def decode_planned(plan: RowPlan, data: bytes, *, table: str) -> dict[str, Any]:
    """``decode_row`` with the conversions of ``row_plan``."""
    try:
        doc = json_bytes.loads(data, "surrogatepass")
    except ValueError as exc:
        raise ChangeEventError(f"table {table}: stored row is not JSON: {exc}") from None
    if type(doc) is not dict:
        raise ChangeEventError(f"table {table}: stored row is not a JSON object")
    row: dict[str, Any] = {}
    for name, tp, _, from_json in plan:
        raw = doc.get(name)
        try:
            row[name] = raw if raw is None or from_json is None else from_json(raw)
        except (ValueError, TypeError, ArithmeticError) as exc:
            raise ChangeEventError(
                f"table {table}: stored value is not a {tp.__name__}: {exc}", field=name
            ) from None
    return row
