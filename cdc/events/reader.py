"""Reading Debezium JSON record values and keys into typed events.

A value is ``{"schema": ..., "payload": ...}`` (``schemas.enable=true``; the schema may be null)
or the bare payload, told apart on read. JSON numbers are never floats on the way in: integers
stay ``int``, others are ``Decimal``, so decimals keep every digit. With a schema, row values
decode to Python types by their logical types; without, they stay as JSON gives them unless the
reader was given a ``TableSpec`` declaring the columns. Unchanged-TOAST placeholders become
``UNAVAILABLE`` either way.

The payload kind is told by its fields: ``__op``/``__deleted`` without ``source`` is an unwrap-SMT
flat row (``cdc.events.unwrap``), ``op`` a change event, ``status`` + ``id`` a transaction event,
``ddl``/``tableChanges`` a schema change. A null value (or null payload) is a tombstone.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from cdc.events.columns import TableSpec
from cdc.events.connect_schema import CompiledSchema, SchemaCache, compile_schema
from cdc.events.envelope import ChangeEvent, ParsedValue, RecordKey, Tombstone
from cdc.events.field_errors import FieldError, Origin, describe, join_path
from cdc.events.json_text import loads, raw_decode
from cdc.events.logical_types import Decoder
from cdc.events.schema_builder import key_schema, value_schema
from cdc.events.schema_change import SchemaChangeEvent
from cdc.events.source import SOURCE_TAGS
from cdc.events.transaction import TransactionEvent
from cdc.events.unavailable import mark_unavailable
from cdc.events.unwrap import envelope_from_flat_row, is_flat_row, split_flat_row

RawRecord = bytes | bytearray | memoryview | str | None

_ENVELOPE_HEAD = re.compile(r'\s*\{\s*"schema"\s*:\s*')
_PAYLOAD_HEAD = re.compile(r'\s*,\s*"payload"\s*:\s*')
_ENVELOPE_TAIL = re.compile(r"\s*\}\s*\Z")
_COMPACT_HEAD = '{"schema":'
_COMPACT_SEPARATOR = ',"payload":'
_ROW_FIELDS = ("before", "after", "message")
_NOT_UNIONS = frozenset({*_ROW_FIELDS, "key", "source", "transaction"})
_AVRO_BRANCHES = frozenset({"string", "long", "int", "boolean", "double", "float", "bytes"})

_Model = TypeVar("_Model", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class _Document:
    compiled: CompiledSchema | None
    payload: Any
    prefix: str
    """Path of the payload in the record: ``payload`` when enveloped, empty when bare."""


class ChangeEventReader:
    """Parses record values and keys; keeps compiled schemas between calls. Thread-safe.

    ``table`` declares the columns of schemaless records (``schemas.enable=false``) so they
    decode as if they had carried its schema; records with a schema decode by their own.
    """

    def __init__(self, table: TableSpec | None = None) -> None:
        self._schemas = SchemaCache()
        self._declared_row: Decoder | None = None
        self._declared_key: Decoder | None = None
        if table is not None:
            self._declared_row = compile_schema(value_schema(table)).decode
            if table.key:
                self._declared_key = compile_schema(key_schema(table)).decode

    def parse_value(
        self,
        raw: RawRecord,
        *,
        key: RawRecord = None,
        topic: str | None = None,
        partition: int | None = None,
        offset: int | None = None,
    ) -> ParsedValue:
        """Parse a record value (and its ``key``, when given) into an event or a tombstone.

        Raises ``ChangeEventError`` naming the field and the given origin on bad input.
        """
        origin = Origin(topic, partition, offset)
        record_key = None if key is None else self._key(key, origin)
        if raw is None:
            return Tombstone(key=record_key)
        doc = self._read(raw, origin, "")
        payload = doc.payload
        if payload is None:
            return Tombstone(key=record_key)
        if type(payload) is not dict:
            raise origin.error(f"expected a JSON object, got {describe(payload)}", doc.prefix)
        try:
            if is_flat_row(payload):
                envelope = self._flat_row_envelope(payload, doc.compiled)
                return self._change(envelope, record_key, doc.prefix, origin)
            if "op" in payload:
                self._decode_rows(payload, doc.compiled)
                return self._change(payload, record_key, doc.prefix, origin)
        except FieldError as exc:
            raise origin.from_field_error(exc, doc.prefix) from None
        if "status" in payload and "id" in payload:
            return _validate(TransactionEvent, payload, doc.prefix, origin)
        if "ddl" in payload or "tableChanges" in payload:
            return _validate(SchemaChangeEvent, payload, doc.prefix, origin)
        reason = "not a change, transaction or schema-change event: required field missing"
        raise origin.error(reason, join_path(doc.prefix, "op"))

    def parse_key(
        self,
        raw: RawRecord,
        *,
        topic: str | None = None,
        partition: int | None = None,
        offset: int | None = None,
    ) -> RecordKey | None:
        """Parse a record key (None for a null key); raises ``ChangeEventError`` on bad input."""
        return None if raw is None else self._key(raw, Origin(topic, partition, offset))

    def value_schema(self, schema_text: str) -> CompiledSchema | None:
        """The compiled Connect schema of values whose ``schema`` is ``schema_text`` (as
        written); raises ``FieldError`` for an invalid schema, ``ValueError`` for bad JSON."""
        return self._compiled(loads(schema_text), schema_text)

    def decode_rows(self, payload: dict[str, Any], compiled: CompiledSchema | None) -> None:
        """Decode the row images of an envelope ``payload`` in place, as ``parse_value`` does
        (by ``compiled``, else the declared table); raises ``FieldError`` naming the field."""
        self._decode_rows(payload, compiled)

    def _key(self, raw: RawRecord, origin: Origin) -> RecordKey | None:
        doc = self._read(raw, origin, "key")
        prefix = join_path("key", doc.prefix)
        payload = doc.payload
        if payload is None:
            return None
        if type(payload) is not dict:
            raise origin.error(f"a key must be a JSON object, got {describe(payload)}", prefix)
        try:
            if doc.compiled is not None:
                columns = doc.compiled.decode(payload)
            else:
                columns = payload if self._declared_key is None else self._declared_key(payload)
        except FieldError as exc:
            raise origin.from_field_error(exc, prefix) from None
        name = None if doc.compiled is None else doc.compiled.name
        return RecordKey.model_construct(columns=columns, schema_name=name)

    def _read(self, raw: RawRecord, origin: Origin, where: str) -> _Document:
        if isinstance(raw, bytes | bytearray | memoryview):
            try:
                text = bytes(raw).decode("utf-8")
            except UnicodeDecodeError as exc:
                raise origin.error(f"not UTF-8 text: {exc.reason}", where) from None
        elif isinstance(raw, str):
            text = raw
        else:
            raise origin.error(f"expected bytes or text, got {type(raw).__name__}", where)
        try:
            return self._split(text)
        except json.JSONDecodeError as exc:
            raise origin.error(f"not JSON: {exc.msg} at char {exc.pos}", where) from None
        except FieldError as exc:
            raise origin.from_field_error(exc, join_path(where, "schema")) from None

    def _split(self, text: str) -> _Document:
        start = _after(_COMPACT_HEAD, _ENVELOPE_HEAD, text, 0)
        if start >= 0:  # JsonConverter's layout: parse the payload only, the schema once per text
            hit = self._schemas.match_at(text, start)
            if hit is not None:
                compiled: CompiledSchema | None
                compiled, end = hit
            else:
                schema, end = raw_decode(text, start)
                compiled = self._compiled(schema, text[start:end])
            start = _after(_COMPACT_SEPARATOR, _PAYLOAD_HEAD, text, end)
            if start >= 0:
                payload, end = raw_decode(text, start)
                if text[end:] == "}" or _ENVELOPE_TAIL.match(text, end):
                    return _Document(compiled, payload, "payload")
        document = loads(text)
        if type(document) is dict and document.keys() == {"schema", "payload"}:
            schema = document["schema"]
            return _Document(self._compiled(schema, repr(schema)), document["payload"], "payload")
        return _Document(None, document, "")

    def _compiled(self, schema: Any, schema_text: str) -> CompiledSchema | None:
        return None if schema is None else self._schemas.get(schema_text, schema)

    def _decode_rows(self, payload: dict[str, Any], compiled: CompiledSchema | None) -> None:
        for name in _ROW_FIELDS:
            value = payload.get(name)
            if value is None:
                continue
            if compiled is not None:
                decoder = compiled.fields.get(name)
            else:
                decoder = self._declared_row if name != "message" else None
            try:
                if decoder is not None:
                    payload[name] = decoder(value)
                elif type(value) is dict and name != "message":
                    mark_unavailable(value)
            except FieldError as exc:
                raise exc.within(name) from None

    def _flat_row_envelope(
        self, payload: dict[str, Any], compiled: CompiledSchema | None
    ) -> dict[str, Any]:
        if compiled is not None:
            row, metadata = split_flat_row(compiled.decode(payload))
        else:
            row, metadata = split_flat_row(payload)
            row = mark_unavailable(row) if self._declared_row is None else self._declared_row(row)
        return envelope_from_flat_row(row, metadata)

    @staticmethod
    def _change(
        payload: dict[str, Any], key: RecordKey | None, prefix: str, origin: Origin
    ) -> ChangeEvent:
        if key is not None:
            payload["key"] = key
        return _validate(ChangeEvent, payload, prefix, origin)


def _after(literal: str, pattern: re.Pattern[str], text: str, index: int) -> int:
    """Index just after ``literal`` (or, failing that, ``pattern``) at ``index``; -1 if neither."""
    end = index + len(literal)
    if text.startswith(literal, index) and not text[end : end + 1].isspace():
        return end
    match = pattern.match(text, index)
    return -1 if match is None else match.end()


def _validate(model: type[_Model], payload: dict[str, Any], prefix: str, origin: Origin) -> _Model:
    try:
        return model.model_validate(payload)
    except ValidationError as exc:
        error = exc
    if _unwrap_avro_unions(payload):  # Avro-JSON renderings wrap optional values: {"string": x}
        try:
            return model.model_validate(payload)
        except ValidationError as exc:
            error = exc
    raise origin.from_validation_error(error, prefix, SOURCE_TAGS) from None


def _unwrap_avro_unions(payload: dict[str, Any]) -> bool:
    changed = False
    for block in (payload, payload.get("source")):
        if type(block) is not dict:
            continue
        for name, value in block.items():
            if type(value) is dict and len(value) == 1 and name not in _NOT_UNIONS:
                branch, inner = next(iter(value.items()))
                if branch in _AVRO_BRANCHES:
                    block[name] = inner
                    changed = True
    return changed


@functools.lru_cache(maxsize=64)
def reader_for(table: TableSpec | None = None) -> ChangeEventReader:
    """The shared reader for a declared table (or for records that carry their schema)."""
    return ChangeEventReader(table)


def parse_value(
    raw: RawRecord,
    *,
    key: RawRecord = None,
    topic: str | None = None,
    partition: int | None = None,
    offset: int | None = None,
    table: TableSpec | None = None,
) -> ParsedValue:
    """Parse a record value with the shared reader; see ``ChangeEventReader.parse_value``."""
    return reader_for(table).parse_value(
        raw, key=key, topic=topic, partition=partition, offset=offset
    )


def parse_key(
    raw: RawRecord,
    *,
    topic: str | None = None,
    partition: int | None = None,
    offset: int | None = None,
    table: TableSpec | None = None,
) -> RecordKey | None:
    """Parse a record key with the shared reader; see ``ChangeEventReader.parse_key``."""
    return reader_for(table).parse_key(raw, topic=topic, partition=partition, offset=offset)
