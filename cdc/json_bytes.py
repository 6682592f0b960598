"""Fast JSON bytes (orjson) for the product's hot paths, the standard library where orjson differs.

orjson is several times faster than ``json`` at both ends, but it writes integers of 64 bits only
(and reads bigger ones as floats), reads and writes UTF-8 only, rejects lone surrogates, and reads
the NaN/Infinity literals as errors. In each of those cases (on read: whenever a float was read)
these functions fall back to the standard library, so callers get what ``json`` gives them.
Callers pass values without non-finite floats (orjson would write them as ``null``): the row and
event encoders turn those into text before encoding.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import orjson

_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
_DECIMAL_DECODER = json.JSONDecoder(parse_float=Decimal)

JSONDecodeError = json.JSONDecodeError
"""Raised by ``loads`` on text that is not JSON (orjson's error is a subclass of it)."""


def dumps(value: Any, errors: str = "strict") -> bytes:
    """``json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8", errors)``;
    raises ``TypeError`` for values JSON cannot hold, as ``json`` does."""
    try:
        return orjson.dumps(value)
    except TypeError:  # ints beyond 64 bits, lone surrogates, or a type JSON cannot hold
        return _ENCODER.encode(value).encode("utf-8", errors)


def loads(data: bytes | bytearray | memoryview, errors: str = "strict") -> Any:
    """``json.loads(bytes(data).decode("utf-8", errors))``: integers of any size, floats as
    float; raises ``json.JSONDecodeError`` (or ``UnicodeDecodeError``) on bad input."""
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:  # NaN literals, surrogates, not UTF-8: json decides
        return json.loads(bytes(data).decode("utf-8", errors))
    if has_float(value):  # orjson reads ints beyond 64 bits as floats: json tells them apart
        return json.loads(bytes(data).decode("utf-8", errors))
    return value


def loads_decimal(data: bytes) -> Any:
    """``json.loads(data, parse_float=Decimal)``: numbers with a fraction or an exponent are
    ``Decimal``, never float; raises ``json.JSONDecodeError`` or ``UnicodeDecodeError``."""
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        pass  # json decides: other UTF encodings, NaN literals, escaped lone surrogates
    else:
        if not has_float(value):
            return value
    return _DECIMAL_DECODER.decode(data.decode(json.detect_encoding(data), "surrogatepass"))


def loads_unchecked(data: bytes | bytearray | memoryview) -> Any:
    """orjson's parse of UTF-8 JSON: a float in the result may have been an integer beyond 64
    bits, so a caller that reads only part of it checks that part with ``has_float`` (and uses
    ``loads`` when it holds one); raises ``json.JSONDecodeError`` on bad input."""
    return orjson.loads(data)


def has_float(value: Any) -> bool:
    """Whether a parsed JSON value holds a float anywhere."""
    kind = type(value)
    if kind is dict:
        items = value.values()
    elif kind is list:
        items = value
    else:
        return kind is float
    for item in items:
        kind = type(item)
        if kind is float or ((kind is dict or kind is list) and has_float(item)):
            return True
    return False
