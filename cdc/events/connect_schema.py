"""Compiling a Kafka Connect JSON schema into value decoders, once per distinct schema.

A compiled schema is a tree of closures (struct -> fields -> logical-type decoders) built once and
cached by the schema's JSON text, so decoding an event walks only its values. Decoding follows
JsonConverter: a null or missing field takes the schema default, else null if the field is
optional, else it is an error; payload keys that the schema does not declare are dropped. The
placeholder for unavailable values decodes to ``UNAVAILABLE`` at any text, bytes, array or map.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cdc.events.field_errors import FieldError, describe
from cdc.events.logical_types import LOGICAL_DECODERS, PHYSICAL_DECODERS, Decoder
from cdc.events.unavailable import (
    PLACEHOLDER_BASE64,
    PLACEHOLDER_HSTORE,
    PLACEHOLDER_INT_ARRAY,
    PLACEHOLDER_TEXT,
    PLACEHOLDER_TEXT_ARRAY,
    UNAVAILABLE,
)

_NO_DEFAULT: Any = object()


@dataclass(frozen=True, slots=True)
class CompiledSchema:
    """Decoders for one Connect schema: ``decode`` for a whole (non-null) value and, for a
    struct, ``fields`` by field name (each for a non-null value of that field)."""

    name: str | None
    decode: Decoder
    fields: Mapping[str, Decoder] = field(default_factory=dict)


def compile_schema(schema: Any) -> CompiledSchema:
    """Compile a Connect schema; raises ``FieldError`` (path inside the schema) if it is invalid."""
    if not isinstance(schema, Mapping):
        raise FieldError(f"a schema must be an object, got {describe(schema)}")
    name = schema.get("name")
    if schema.get("type") == "struct" and name not in LOGICAL_DECODERS:
        parts = _struct_fields(schema)
        return CompiledSchema(name, _struct_decoder(parts), {f[0]: f[1] for f in parts})
    return CompiledSchema(name, compile_decoder(schema))


def compile_decoder(schema: Any) -> Decoder:
    """A decoder for non-null values of ``schema``."""
    if not isinstance(schema, Mapping):
        raise FieldError(f"a schema must be an object, got {describe(schema)}")
    kind: Any = schema.get("type")
    name: Any = schema.get("name")
    logical = LOGICAL_DECODERS.get(name) if isinstance(name, str) else None
    if logical is not None:
        decoder = logical(schema)
    elif kind == "struct":
        decoder = _struct_decoder(_struct_fields(schema))
    elif kind == "array":
        decoder = _array_decoder(schema)
    elif kind == "map":
        decoder = _map_decoder(schema)
    elif kind in PHYSICAL_DECODERS:
        decoder = PHYSICAL_DECODERS[kind]
    else:
        raise FieldError(f"unknown schema type {kind!r}")
    placeholders = _PLACEHOLDERS.get(kind)
    return decoder if placeholders is None else _placeholder_aware(decoder, placeholders)


_PLACEHOLDERS: Mapping[str, tuple[Any, ...]] = {
    "string": (PLACEHOLDER_TEXT,),
    "bytes": (PLACEHOLDER_BASE64,),
    "array": (PLACEHOLDER_TEXT_ARRAY, PLACEHOLDER_INT_ARRAY),
    "map": (PLACEHOLDER_HSTORE,),
}
"""The forms of the unavailable-value placeholder by Connect type (see ``unavailable``)."""


def _placeholder_aware(decoder: Decoder, placeholders: tuple[Any, ...]) -> Decoder:
    if len(placeholders) == 1:
        (placeholder,) = placeholders

        def decode_one(value: Any) -> Any:
            return UNAVAILABLE if value == placeholder else decoder(value)

        return decode_one

    def decode(value: Any) -> Any:
        return UNAVAILABLE if value in placeholders else decoder(value)

    return decode


_Field = tuple[str, Decoder, bool, Any]


def _struct_fields(schema: Mapping[str, Any]) -> tuple[_Field, ...]:
    declared = schema.get("fields")
    if not isinstance(declared, list):
        raise FieldError("struct schema without a fields list")
    fields: list[_Field] = []
    for index, spec in enumerate(declared):
        name = spec.get("field") if isinstance(spec, Mapping) else None
        if not isinstance(name, str):
            raise FieldError("struct field schema without a field name", f"[{index}]")
        try:
            decoder = compile_decoder(spec)
            raw_default = spec.get("default")
            default = _NO_DEFAULT if raw_default is None else decoder(raw_default)
        except FieldError as exc:
            raise exc.within(name) from None
        fields.append((name, decoder, bool(spec.get("optional", False)), default))
    return tuple(fields)


def _struct_decoder(fields: tuple[_Field, ...]) -> Decoder:
    def decode(value: Any) -> dict[str, Any]:
        if type(value) is not dict:
            raise FieldError(f"expected an object, got {describe(value)}")
        out: dict[str, Any] = {}
        for name, decoder, optional, default in fields:
            item = value.get(name)
            if item is None:
                if default is not _NO_DEFAULT:
                    out[name] = default
                elif optional:
                    out[name] = None
                else:
                    state = "null" if name in value else "missing"
                    raise FieldError(f"required field is {state}", name)
                continue
            try:
                out[name] = decoder(item)
            except FieldError as exc:
                raise exc.within(name) from None
        return out

    return decode


def _array_decoder(schema: Mapping[str, Any]) -> Decoder:
    items = schema.get("items")
    try:
        element = compile_decoder(items)
    except FieldError as exc:
        raise exc.within("items") from None
    optional = isinstance(items, Mapping) and bool(items.get("optional", False))

    def decode(value: Any) -> list[Any]:
        if type(value) is not list:
            raise FieldError(f"expected an array, got {describe(value)}")
        out: list[Any] = []
        for index, item in enumerate(value):
            if item is None:
                if not optional:
                    raise FieldError("null element in an array of required values", f"[{index}]")
                out.append(None)
                continue
            try:
                out.append(element(item))
            except FieldError as exc:
                raise exc.within(f"[{index}]") from None
        return out

    return decode


def _map_decoder(schema: Mapping[str, Any]) -> Decoder:
    decoders = []
    for part in ("keys", "values"):
        try:
            decoders.append(compile_decoder(schema.get(part)))
        except FieldError as exc:
            raise exc.within(part) from None
    key_decoder, value_decoder = decoders

    def entry(key: Any, item: Any) -> tuple[Any, Any]:
        try:
            return key_decoder(key), None if item is None else value_decoder(item)
        except FieldError as exc:
            raise exc.within(f"[{key!r}]") from None

    def decode(value: Any) -> dict[Any, Any]:
        # JsonConverter writes maps with text keys as objects, others as [key, value] pairs.
        try:
            if type(value) is dict:
                return dict(entry(key, item) for key, item in value.items())
            if type(value) is list and all(type(p) is list and len(p) == 2 for p in value):
                return dict(entry(key, item) for key, item in value)
        except TypeError:  # a struct or array key: unhashable in Python
            raise FieldError("map keys must be scalar values") from None
        raise FieldError(f"expected a map, got {describe(value)}")

    return decode


class SchemaCache:
    """Compiled schemas by their JSON text, least recently used evicted first; thread-safe.

    The most recently compiled or looked-up few are also matched in place against a record's
    text (``match_at``), so a run of records with one schema never parses that schema again.
    """

    def __init__(self, capacity: int = 512, recent: int = 8) -> None:
        self._capacity = capacity
        self._recent_size = recent
        self._lock = threading.Lock()
        self._by_text: OrderedDict[str, CompiledSchema] = OrderedDict()
        # Replaced, never changed in place, so match_at can read it without the lock.
        self._recent: tuple[tuple[str, CompiledSchema], ...] = ()

    def match_at(self, text: str, start: int) -> tuple[CompiledSchema, int] | None:
        """A recent schema whose text appears at ``start`` of ``text``, with the end index."""
        for schema_text, compiled in self._recent:
            if text.startswith(schema_text, start):
                return compiled, start + len(schema_text)
        return None

    def get(self, schema_text: str, schema: Any) -> CompiledSchema:
        """The compiled form of ``schema`` (whose JSON text is ``schema_text``)."""
        with self._lock:
            compiled = self._by_text.get(schema_text)
            if compiled is None:
                compiled = compile_schema(schema)
                self._by_text[schema_text] = compiled
                if len(self._by_text) > self._capacity:
                    self._by_text.popitem(last=False)
            else:
                self._by_text.move_to_end(schema_text)
            others = tuple(pair for pair in self._recent if pair[0] != schema_text)
            self._recent = ((schema_text, compiled), *others[: self._recent_size - 1])
            return compiled
