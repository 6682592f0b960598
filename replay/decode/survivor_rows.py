"""A rebuild's survivors decoded in the compaction task that kept them, in Python.

``compacted_read.decoded_survivors`` hands each task's survivors (a key's newest live image, a
truncate candidate) to ``SurvivorDecoder.row`` instead of shipping their values to the JVM for
``decode_native``: a first rebuild of 1 M changes over 100 k keys then plans no ``from_json``
projections on a cold driver and runs none under C1 (``bench/README.md``).

The rows are ``fallback.decoded_row``'s (the Python path, whose frame equals the native one).
A value in the common shape is read the short way: orjson, then the ``cdc.events`` reader's own
row decoders and the codecs' ``to_python``. The common shape: an envelope (bare, or after the
topic's schema text ``TopicSchema.value_prefix`` and nothing more) with ``op`` c/u/r/d and its
images, no non-integral number in them but in float columns (orjson reads a float, the parser a
Decimal), and the ``source`` fields ``position`` reads of the JSON types ``SOURCE_TYPE`` gives
them. Any other value, and any the short way fails on, goes the whole parser's way, which also
words the errors. The short way checks the envelope's fields as ``ChangeEvent`` takes them,
but for ``source``: as in ``decode_native``, only the fields a position reads (not the others,
nor a connector's required ones: the parser's models check those), and the record key only
where the image lacks a key column; ``__txn`` stays null (a rebuild does not read it). Where
``decode_native`` read a value the parser refuses (e.g. one without the schema text in a topic
with schemas: the parser has no schema for its images), the parser's way makes it a bad record.
Like ``decode_python``'s, every row holds its raw value (``decoded_survivors`` keeps it only for
a rejected record).
"""

from __future__ import annotations

from typing import Any

import orjson

from cdc.errors import ChangeEventError
from cdc.events import UNAVAILABLE, ChangeEventReader
from cdc.events.connect_schema import CompiledSchema
from cdc.events.field_errors import FieldError
from replay.decode.fallback import SOURCE_NAMES, decoded_row
from replay.decode.schema import SOURCE_TYPE, TopicSchema
from replay.sinks.protocol import OP_DELETE, OP_UPSERT
from replay.spark import T

_SOURCE_KINDS = tuple(
    str if isinstance(field.dataType, T.StringType) else int for field in SOURCE_TYPE.fields
)
_OPS = {"c": OP_UPSERT, "u": OP_UPSERT, "r": OP_UPSERT, "d": OP_DELETE}
_SHORT_FAILS = (
    ValueError, TypeError, ArithmeticError, AttributeError, KeyError, FieldError, ChangeEventError
)  # fmt: skip
_PAYLOAD = b'{"payload":'
_PARSERS_OWN = frozenset({"kind", "key", "message", "unwrapped"})
"""``ChangeEvent`` fields the parser sets itself (a payload's own go its way)."""
_TIMES = ("ts_ms", "ts_us", "ts_ns")


class _Long(Exception):
    """The short way cannot read this value: take the parser's."""


class SurvivorDecoder:
    """Decodes one topic's values to rows of ``fallback.decoded_type`` (``row``)."""

    def __init__(self, schema: TopicSchema) -> None:
        self.schema = schema
        self.reader = ChangeEventReader(schema.table)
        self.prefix = schema.value_prefix.encode() if schema.value_prefix else None
        self.compiled: CompiledSchema | None = None
        if schema.value_prefix:
            text = schema.value_prefix.removeprefix('{"schema":').removesuffix(',"payload":')
            self.compiled = self.reader.value_schema(text)
        decoded = self.compiled is not None or schema.table is not None
        self.floats = frozenset(
            c.name
            for c in schema.columns
            if decoded and isinstance(c.codec.spark, T.DoubleType | T.FloatType)
        )
        """Columns whose decoder reads orjson's float as the parser's Decimal (``float()``)."""
        keys = set(schema.primary_key)
        self.columns = [(c.name, c.codec.to_python, c.name in keys) for c in schema.columns]

    def row(
        self, origin: tuple[str, int, int, bytes | None], value: bytes, carried: tuple[Any, ...]
    ) -> tuple[Any, ...] | None:
        """``origin`` (topic, partition, offset, key) and ``value`` as a decoded row (None: a
        tombstone or a logical message), ``carried`` after it."""
        try:
            return self._short(origin, value, carried)
        except (_Long, *_SHORT_FAILS):  # orjson's JSONDecodeError is a ValueError
            return decoded_row(self.reader, self.schema, origin, value, carried)

    def _short(
        self, origin: tuple[str, int, int, bytes | None], value: bytes, carried: tuple[Any, ...]
    ) -> tuple[Any, ...]:
        if self.prefix is not None:
            if not value.startswith(self.prefix):
                raise _Long
            document = orjson.loads(_PAYLOAD + value[len(self.prefix) :])
            if len(document) != 1:  # members after the payload: not JsonConverter's layout
                raise _Long
            payload, compiled = document["payload"], self.compiled
        else:
            payload, compiled = orjson.loads(value), None
            if type(payload) is dict and "schema" in payload:  # the parser reads it first
                raise _Long
            if self.schema.table is None:  # no decoder for its images: the parser's error
                raise _Long
        if type(payload) is not dict or not _PARSERS_OWN.isdisjoint(payload):
            raise _Long
        for name in _TIMES:  # as ``ChangeEvent`` takes them
            if payload.get(name) is not None and type(payload[name]) is not int:
                raise _Long
        _check_transaction(payload.get("transaction"))
        op = payload.get("op")
        kind = _OPS.get(op) if type(op) is str else None
        before, after = payload.get("before"), payload.get("after")
        if kind is None or (after is None) is (op != "d") or (op == "d" and before is None):
            raise _Long
        image = before if op == "d" else after
        if type(image) is not dict or (before is not None and type(before) is not dict):
            raise _Long
        if self._has_float(before) or self._has_float(after):
            raise _Long
        source = self._source(payload.get("source"))
        self.reader.decode_rows(payload, compiled)
        image = payload["before"] if op == "d" else payload["after"]
        values: list[Any] = []
        unavailable: list[str] = []
        key_columns: dict[str, Any] | None = None
        for name, to_python, in_key in self.columns:
            column = image.get(name)
            if column is None and in_key:
                if key_columns is None:
                    key_columns = self._key(origin)
                column = key_columns.get(name)
            if column is UNAVAILABLE:
                if op != "d":
                    unavailable.append(name)
                column = None
            elif column is not None:
                column = to_python(column)
            if column is None and in_key:
                raise _Long  # "key column ... is null", worded by the parser
            values.append(column)
        return (*values, kind, None, unavailable, None, source, *origin, None, value, *carried)

    def _has_float(self, image: dict[str, Any] | None) -> bool:
        if image is None:
            return False
        for name, item in image.items():
            if type(item) in _NESTED and name not in self.floats and _has_float(item):
                return True
        return False

    def _key(self, origin: tuple[str, int, int, bytes | None]) -> dict[str, Any]:
        topic, partition, offset, raw = origin
        key = self.reader.parse_key(raw, topic=topic, partition=partition, offset=offset)
        return {} if key is None else key.columns

    def _source(self, block: Any) -> tuple[Any, ...]:
        """The fields ``position`` reads, of their JSON types (as ``SOURCE_TYPE`` reads them);
        the connector's name given."""
        if type(block) is not dict or type(block.get("connector")) is not str:
            raise _Long
        fields = tuple(block.get(name) for name in SOURCE_NAMES)
        for item, kind in zip(fields, _SOURCE_KINDS, strict=True):
            if item is not None and type(item) is not kind:
                raise _Long
        return fields


def _check_transaction(block: Any) -> None:
    """Raises ``_Long`` unless ``block`` is null or as ``TransactionBlock`` takes it."""
    if block is None:
        return
    if type(block) is not dict or type(block.get("id")) is not str:
        raise _Long
    if type(block.get("total_order")) is not int:
        raise _Long
    if type(block.get("data_collection_order")) is not int:
        raise _Long


def _has_float(item: Any) -> bool:
    """Whether a value holds a non-integral JSON number (orjson reads it as a float, the
    parser as a Decimal)."""
    kind = type(item)
    if kind is float:
        return True
    if kind is dict:
        for inner in item.values():
            if type(inner) in _NESTED and _has_float(inner):
                return True
    elif kind is list:
        for inner in item:
            if type(inner) in _NESTED and _has_float(inner):
                return True
    return False


_NESTED = (float, dict, list)
