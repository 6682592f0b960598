"""JSON text in and out without floats: non-integral numbers are ``decimal.Decimal`` both ways."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

_DECODER = json.JSONDecoder(parse_float=Decimal)

raw_decode = _DECODER.raw_decode
"""``raw_decode(text, index) -> (value, end)``: one JSON value starting exactly at ``index``."""


def loads(text: str) -> Any:
    """Parse JSON text; integers stay ``int``, other numbers become ``Decimal``.

    Raises ``json.JSONDecodeError`` (a ``ValueError``) on bad input.
    """
    return _DECODER.decode(text)


def dumps(value: Any) -> str:
    """Compact JSON text of ``value``; ``Decimal`` numbers are written digit for digit.

    Raises ``ValueError`` for values JSON cannot hold (NaN, infinities, other types).
    """
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except TypeError:
        return _dumps_with_decimals(value)


def _dumps_with_decimals(value: Any) -> str:
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise ValueError(f"JSON cannot hold {value}")
        return str(value)
    if isinstance(value, dict):
        items = (f"{_dumps_key(key)}:{_dumps_with_decimals(item)}" for key, item in value.items())
        return "{" + ",".join(items) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(_dumps_with_decimals(item) for item in value) + "]"
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False)
    except TypeError as exc:
        raise ValueError(str(exc)) from None


def _dumps_key(key: object) -> str:
    if not isinstance(key, str):
        raise ValueError(f"JSON object keys must be text, got {type(key).__name__}")
    return json.dumps(key, ensure_ascii=False)
