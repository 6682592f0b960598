"""The declaration of a state table: a name, typed columns and the primary-key column(s)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date
from decimal import Context, Decimal
from types import MappingProxyType
from typing import Any

from cdc.errors import ChangeEventError
from cdc.state import key_codec, row_codec
from cdc.state.changes import Row

MAX_NAME_BYTES = 255
_CANONICAL_KEY_TYPES = frozenset({str, int, bool, bytes, date})


class StateTable:
    """A keyed table of typed rows (dicts), e.g.::

        orders = StateTable(
            "orders", {"order_id": int, "line": int, "sku": str, "price": Decimal},
            key=("order_id", "line"), scales={"price": 2},
        )

    Column types: int, float, str, bool, Decimal, date, datetime, bytes, and dict/list for JSON
    values. Key columns are never None and cannot be dict/list; other columns may be None (or
    absent from a row put). Rows scan in primary-key order (tuple order of the key values).
    A Decimal column given a scale (as its change events need) holds values at exactly that
    scale: with scale 2, ``1.5`` is stored as ``1.50`` and ``1.234`` is refused.
    A key may be given as the key-column dict (or a whole row), a tuple of the key values in
    ``key`` order, or the bare value for a one-column key.
    """

    __slots__ = (
        "_checks", "_key_types", "_plan", "_text_key", "canonical_keys", "columns", "key",
        "mutable_values", "name", "scales",
    )  # fmt: skip

    def __init__(
        self,
        name: str,
        columns: Mapping[str, type],
        key: str | Sequence[str],
        *,
        scales: Mapping[str, int] | None = None,
    ) -> None:
        if not name or len(name.encode("utf-8")) > MAX_NAME_BYTES:
            raise ValueError(f"table name must be 1-{MAX_NAME_BYTES} UTF-8 bytes: {name!r}")
        self.name = name
        bad = {c: t for c, t in columns.items() if t not in row_codec.COLUMN_TYPES}
        if bad:
            raise ValueError(f"table {name}: unsupported column types {bad}")
        self.columns: Mapping[str, type] = MappingProxyType(dict(columns))
        self.key: tuple[str, ...] = (key,) if isinstance(key, str) else tuple(key)
        if not self.key or len(set(self.key)) != len(self.key):
            raise ValueError(f"table {name}: the primary key needs distinct columns")
        for column in self.key:
            if column not in self.columns:
                raise ValueError(f"table {name}: key column {column!r} is not a column")
            if self.columns[column] not in key_codec.KEY_TYPES:
                raise ValueError(f"table {name}: key column {column!r} cannot be JSON")
        self._key_types = tuple(self.columns[c] for c in self.key)
        self.scales: Mapping[str, int] = MappingProxyType(dict(scales or {}))
        """Fractional digits of ``Decimal`` columns, as their change events declare them."""
        for column, scale in self.scales.items():
            if self.columns.get(column) is not Decimal:
                raise ValueError(f"table {name}: scale given for {column!r}, not a Decimal column")
            if not isinstance(scale, int) or isinstance(scale, bool) or scale < 0:
                raise ValueError(f"table {name}: scale of {column!r} must be an int >= 0")
        self._plan = row_codec.row_plan(self.columns)
        ordered = [*self.key, *[c for c in self.columns if c not in self.key]]
        self._checks = tuple(
            [
                (c, row_codec.value_check(self.columns[c]), c in self.scales, c in self.key)
                for c in ordered
            ]
        )
        self._text_key = self._key_types == (str,)
        self.canonical_keys = all(t in _CANONICAL_KEY_TYPES for t in self._key_types)
        """Key values read back from encoded keys equal the checked ones exactly (no -0.0,
        trailing zeros or time zones that the key codec normalises)."""
        self.mutable_values = any(t in (dict, list) for t in self.columns.values())
        """Rows hold dicts or lists, which a caller could change in place."""

    def __repr__(self) -> str:
        return f"StateTable({self.name!r}, key={self.key})"

    def key_of(self, key: object) -> Row:
        """The checked key-column dict of ``key`` (a dict or row, a tuple, or a bare value)."""
        if isinstance(key, Mapping):
            missing = [c for c in self.key if key.get(c) is None]
            if missing:
                raise ChangeEventError(
                    f"table {self.name}: key column is missing", field=missing[0]
                )
            values: Sequence[object] = [key[c] for c in self.key]
        elif isinstance(key, tuple) and len(key) == len(self.key):
            values = key
        elif len(self.key) == 1:
            values = [key]
        else:
            raise ChangeEventError(
                f"table {self.name}: a key is a dict or a tuple of {len(self.key)} values",
                field=self.key[0],
            )
        return {c: self._check(c, v) for c, v in zip(self.key, values, strict=True)}

    def encode_key(self, key: object) -> bytes:
        """The order-preserving bytes of ``key`` (any form ``key_of`` accepts)."""
        if type(key) is str and self._text_key:  # the common bare key, as key_of takes it
            return key_codec.encode_text(key)
        return self._encode_checked_key(self.key_of(key))

    def _encode_checked_key(self, checked: Row) -> bytes:
        if self._text_key:
            return key_codec.encode_text(checked[self.key[0]])
        try:
            return key_codec.encode_key(self._key_types, [checked[c] for c in self.key])
        except (ValueError, OverflowError) as exc:
            raise ChangeEventError(
                f"table {self.name}: bad key: {exc}", field=self.key[0]
            ) from None

    def decode_key(self, data: bytes) -> Row:
        """The key-column dict of encoded key bytes."""
        try:
            values = key_codec.decode_key(self._key_types, data)
        except ValueError as exc:
            raise ChangeEventError(f"table {self.name}: stored key: {exc}") from None
        row = dict(zip(self.key, values, strict=True))
        for column in self.scales.keys() & row.keys():  # the key codec drops trailing zeros
            row[column] = self._to_scale(column, row[column])
        return row

    def check_row(self, row: Mapping[str, Any]) -> Row:
        """``row`` with every column checked (absent non-key columns are None)."""
        columns = self.columns
        for column in row:
            if column not in columns:
                raise ChangeEventError(f"table {self.name}: unknown column", field=str(column))
        checked: Row = {}
        for column, check, scaled, is_key in self._checks:
            value = row.get(column)
            if value is None:
                if is_key:
                    raise ChangeEventError(
                        f"table {self.name}: key column is missing", field=column
                    )
                checked[column] = None
                continue
            try:
                value = check(value)
            except TypeError:
                self._check(column, value)  # raises the ChangeEventError naming the column
            checked[column] = self._to_scale(column, value) if scaled else value
        return checked

    def encode_row(self, row: Mapping[str, Any]) -> tuple[bytes, bytes]:
        """The encoded (key, row) of a row, checked first."""
        key, data, _ = self.check_and_encode(row)
        return key, data

    def check_and_encode(self, row: Mapping[str, Any]) -> tuple[bytes, bytes, Row]:
        """The encoded key and row of ``row``, and the checked row they encode."""
        checked = self.check_row(row)  # its key columns are checked: encode them as they are
        return (
            self._encode_checked_key(checked),
            row_codec.encode_planned(self._plan, checked),
            checked,
        )

    def decode_row(self, data: bytes) -> Row:
        """The row of stored bytes made by ``encode_row``."""
        return row_codec.decode_planned(self._plan, data, table=self.name)

    def _check(self, column: str, value: object, tp: type | None = None) -> Any:
        checked = row_codec.check_value(
            tp or self.columns[column], value, table=self.name, column=column
        )
        return self._to_scale(column, checked) if column in self.scales else checked

    def _to_scale(self, column: str, value: Decimal) -> Decimal:
        scale = self.scales[column]
        if value.is_finite() and value.as_tuple().exponent == -scale:
            return value  # already at the scale: quantize would return an equal copy
        if value.is_finite():
            digits = max(value.adjusted(), 0) + scale + 2
            scaled = value.quantize(Decimal(1).scaleb(-scale), context=Context(prec=digits))
            if scaled == value:
                return scaled
        raise ChangeEventError(
            f"table {self.name}: {value} is not a number with at most {scale} decimals",
            field=column,
        )
