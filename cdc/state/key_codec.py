"""Order-preserving encoding of primary-key values: encoded keys sort like the value tuples.

Every value is self-delimiting, so a composite key is the concatenation of its column values and
byte order of encoded keys is the order of the python tuples (column by column). Per type:

- ``int``: a length header (0x80 +/- byte count) then the magnitude, complemented when negative;
- ``float``: IEEE 754 big-endian, sign bit flipped (all bits for negatives); -0.0 is 0.0, NaN
  is refused;
- ``bool``: one byte; ``date``: the 4-byte proleptic ordinal;
- ``datetime``: 8-byte microseconds since 0001-01-01 (UTC for aware values), then a naive/aware
  flag byte; aware values decode in UTC;
- ``str`` (UTF-8) and ``bytes``: 0x00 escaped as 0x00 0xFF, terminated by 0x00 0x01;
- ``Decimal``: sign class, adjusted exponent (as int) and significant digits, so values sort
  numerically; trailing zeros are not kept (``Decimal("1.50")`` decodes as ``Decimal("1.5")``,
  an equal value); NaN and infinities are refused.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

_INVERT = bytes(range(255, -1, -1))
_EPOCH = datetime(1, 1, 1)
_SIGN = 1 << 63
_ALL = (1 << 64) - 1


def _enc_int(n: int) -> bytes:
    if n == 0:
        return b"\x80"
    size = (abs(n).bit_length() + 7) // 8
    if size > 127:
        raise ValueError("integer key values are limited to 127 bytes")
    body = abs(n).to_bytes(size, "big")
    if n > 0:
        return bytes([0x80 + size]) + body
    return bytes([0x80 - size]) + body.translate(_INVERT)


def _dec_int(data: bytes, pos: int) -> tuple[int, int]:
    head = data[pos]
    size = abs(head - 0x80)
    body = data[pos + 1 : pos + 1 + size]
    if len(body) != size:
        raise ValueError("truncated integer")
    if head >= 0x80:
        return int.from_bytes(body, "big"), pos + 1 + size
    return -int.from_bytes(body.translate(_INVERT), "big"), pos + 1 + size


def _enc_float(x: float) -> bytes:
    if x != x:
        raise ValueError("NaN cannot be a key value")
    bits = int.from_bytes(struct.pack(">d", x + 0.0), "big")  # + 0.0 turns -0.0 into 0.0
    return (bits ^ _ALL if bits & _SIGN else bits | _SIGN).to_bytes(8, "big")


def _dec_float(data: bytes, pos: int) -> tuple[float, int]:
    bits = int.from_bytes(_fixed(data, pos, 8), "big")
    bits = bits ^ _SIGN if bits & _SIGN else bits ^ _ALL
    return struct.unpack(">d", bits.to_bytes(8, "big"))[0], pos + 8


def _enc_bytes(b: bytes) -> bytes:
    return b.replace(b"\x00", b"\x00\xff") + b"\x00\x01"


def _dec_bytes(data: bytes, pos: int) -> tuple[bytes, int]:
    end = data.find(b"\x00", pos)
    while end >= 0 and data[end + 1 : end + 2] == b"\xff":
        end = data.find(b"\x00", end + 2)
    if end < 0 or data[end + 1 : end + 2] != b"\x01":
        raise ValueError("unterminated string")
    return data[pos:end].replace(b"\x00\xff", b"\x00"), end + 2


def _dec_str(data: bytes, pos: int) -> tuple[str, int]:
    raw, pos = _dec_bytes(data, pos)
    return raw.decode("utf-8", "surrogatepass"), pos


def _enc_datetime(dt: datetime) -> bytes:
    aware = dt.utcoffset() is not None
    wall = dt.astimezone(UTC).replace(tzinfo=None) if aware else dt
    micros = (wall - _EPOCH) // timedelta(microseconds=1)
    return micros.to_bytes(8, "big") + (b"\x01" if aware else b"\x00")


def _dec_datetime(data: bytes, pos: int) -> tuple[datetime, int]:
    raw = _fixed(data, pos, 9)
    dt = _EPOCH + timedelta(microseconds=int.from_bytes(raw[:8], "big"))
    return (dt.replace(tzinfo=UTC) if raw[8] else dt), pos + 9


def _enc_decimal(d: Decimal) -> bytes:
    if not d.is_finite():
        raise ValueError("NaN and infinity cannot be key values")
    if d.is_zero():
        return b"\x02"
    digits = "".join(map(str, d.as_tuple().digits)).rstrip("0").encode()
    if d > 0:
        return b"\x03" + _enc_int(d.adjusted()) + digits + b"\x00"
    return b"\x01" + _enc_int(-d.adjusted()) + digits.translate(_INVERT) + b"\xff"


def _dec_decimal(data: bytes, pos: int) -> tuple[Decimal, int]:
    head = data[pos]
    if head == 0x02:
        return Decimal(0), pos + 1
    if head not in (0x01, 0x03):
        raise ValueError("bad decimal")
    negative = head == 0x01
    adjusted, pos = _dec_int(data, pos + 1)
    end = data.find(b"\xff" if negative else b"\x00", pos)
    if end <= pos:
        raise ValueError("bad decimal digits")
    raw = data[pos:end].translate(_INVERT) if negative else data[pos:end]
    digits = tuple(int(c) for c in raw.decode("ascii"))
    exponent = (-adjusted if negative else adjusted) - len(digits) + 1
    return Decimal((int(negative), digits, exponent)), end + 1


def _fixed(data: bytes, pos: int, size: int) -> bytes:
    raw = data[pos : pos + size]
    if len(raw) != size:
        raise ValueError("truncated key")
    return raw


def encode_text(text: str) -> bytes:
    """The encoded key of a one-column ``str`` key (what ``encode_key((str,), [text])`` gives)."""
    return text.encode("utf-8", "surrogatepass").replace(b"\x00", b"\x00\xff") + b"\x00\x01"


_Decoder = Callable[[bytes, int], tuple[Any, int]]
_CODECS: dict[type, tuple[Callable[[Any], bytes], _Decoder]] = {
    int: (_enc_int, _dec_int),
    float: (_enc_float, _dec_float),
    bool: (lambda b: b"\x01" if b else b"\x00", lambda d, p: (_fixed(d, p, 1) == b"\x01", p + 1)),
    str: (encode_text, _dec_str),
    bytes: (_enc_bytes, _dec_bytes),
    Decimal: (_enc_decimal, _dec_decimal),
    date: (
        lambda d: d.toordinal().to_bytes(4, "big"),
        lambda d, p: (date.fromordinal(int.from_bytes(_fixed(d, p, 4), "big")), p + 4),
    ),
    datetime: (_enc_datetime, _dec_datetime),
}

KEY_TYPES: frozenset[type] = frozenset(_CODECS)
"""The column types a primary key may use."""


def encode_key(types: Sequence[type], values: Sequence[Any]) -> bytes:
    """Encode key ``values`` (already checked against their column ``types``)."""
    return b"".join([_CODECS[t][0](v) for t, v in zip(types, values, strict=True)])


def decode_key(types: Sequence[type], data: bytes) -> tuple[Any, ...]:
    """Decode a key made by ``encode_key`` with the same ``types``; ValueError if malformed."""
    values: list[Any] = []
    pos = 0
    try:
        for t in types:
            value, pos = _CODECS[t][1](data, pos)
            values.append(value)
    except (IndexError, UnicodeDecodeError, OverflowError, struct.error) as exc:
        raise ValueError(f"malformed key: {exc}") from exc
    if pos != len(data):
        raise ValueError("trailing bytes after key")
    return tuple(values)
