"""The decoding plan of one topic: its row columns and key columns compiled to Spark, and the
``from_json`` schemas of its record values and keys.

The columns come from the Connect schema of a record of the topic (schemas on: the ``schema``
of the newest record, read on the driver) or from a declared ``cdc.events.TableSpec``
(schemas off). The value schema reads both layouts: ``{"schema": ..., "payload": <envelope>}``
and the bare envelope, so one topic may mix them. Whether decimals are base64 bytes (Connect's
default) or JSON numbers (``decimal.format=NUMERIC``) is a converter setting, so it is decided
per topic from the sample record (base64 when the sample has no decimal value).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from json import JSONDecoder, dumps
from typing import Any

from cdc.events.columns import TableSpec
from cdc.events.json_text import loads
from cdc.events.schema_builder import envelope_schema, key_schema
from cdc.events.unwrap import is_flat_row
from replay.decode.codec import Codec, UnsupportedSchema
from replay.decode.connect_types import compile_codec
from replay.spark import T

CORRUPT = "__corrupt_record"
"""The ``from_json`` field that receives the text of a record that does not parse."""
_DECIMAL = "org.apache.kafka.connect.data.Decimal"
_FROM_RECORD: dict[tuple[Any, ...], TopicSchema] = {}
_CACHE_SIZE = 64
_SCHEMA_HEAD, _PAYLOAD_HEAD = '{"schema":', ',"payload":'


# What Spark's JSON reader accepts at most (its maxNumLen, Jackson's maxNameLength; strings far
# below Jackson's limit): a schema past them makes the whole value corrupt there, so its values
# must reach from_json whole, not cut.
_MAX_NUMBER_CHARS, _MAX_NAME_CHARS, _MAX_SCHEMA_CHARS = 1_000, 50_000, 1_000_000


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _short_number(text: str) -> None:
    if len(text) > _MAX_NUMBER_CHARS:
        raise ValueError("a number longer than Spark reads")


def _short_names(pairs: list[tuple[str, Any]]) -> None:
    if any(len(name) > _MAX_NAME_CHARS for name, _ in pairs):
        raise ValueError("a key longer than Spark reads")


# JSON as Spark reads it (no NaN or Infinity, the limits above); the values are not kept.
_STRICT_JSON = JSONDecoder(
    parse_constant=_refuse_constant, parse_int=_short_number, parse_float=_short_number,
    object_pairs_hook=_short_names,
)  # fmt: skip


def value_prefix(value: bytes) -> str | None:
    """The text a value in JsonConverter's compact layout starts with, up to its payload:
    ``{"schema":<the schema, exactly as written>,"payload":``; None for any other value.

    The schema's end is found by parsing it, not by looking for the delimiter (a schema may
    hold ``,"payload":`` itself, e.g. as a key of its ``parameters``). A value that starts
    with this exact text is ``{"payload":`` plus its rest to ``from_json``, which then skips
    no schema (``replay.decode.expressions``)."""
    if not value.startswith(b'{"schema":{'):
        return None
    try:
        text = value.decode()
        _, end = _STRICT_JSON.raw_decode(text, len(_SCHEMA_HEAD))
    except ValueError:  # not UTF-8, not JSON, or not as Spark reads it
        return None
    if end > _MAX_SCHEMA_CHARS or not text.startswith(_PAYLOAD_HEAD, end):
        return None
    return text[: end + len(_PAYLOAD_HEAD)]


def remember(cache: dict[Any, Any], key: Any, value: Any) -> None:
    """Put ``key`` in a bounded cache of decoding plans (the oldest entries go past 64)."""
    cache[key] = value
    while len(cache) > _CACHE_SIZE:
        del cache[next(iter(cache))]


def _struct(*fields: tuple[str, T.DataType]) -> T.StructType:
    return T.StructType([T.StructField(name, kind) for name, kind in fields])


_S, _L, _I = T.StringType(), T.LongType(), T.IntegerType()
SOURCE_TYPE = _struct(
    ("connector", _S), ("sequence", _S), ("lsn", _L), ("txId", _L), ("gtid", _S), ("file", _S),
    ("pos", _L), ("row", _I), ("change_lsn", _S), ("commit_lsn", _S), ("event_serial_no", _L),
    ("processor_id", _S), ("commit_seq", _L),
)  # fmt: skip
"""The ``source`` fields read: the connector, each connector's position (see ``positions``),
the transaction of PostgreSQL and MySQL events, a replicator bound's processor. No more: each
field costs ``from_json`` work per event (with the 28 fields every connector writes, most never
read, 1 M benchmark values parsed in 3.4-3.6 s against 2.9-3.0 s, on two cores)."""
TRANSACTION_TYPE = _struct(("id", _S))
"""The ``transaction`` fields read: its id (the orders within it are not: offsets order events)."""


@dataclass(frozen=True)
class ColumnSpec:
    """One row (or key) column: its codec, whether it may be null, and its raw JSON default."""

    name: str
    codec: Codec
    optional: bool = True
    default: Any = None


def _columns(struct: Mapping[str, Any], numeric: bool) -> tuple[ColumnSpec, ...]:
    fields = struct.get("fields")
    if struct.get("type") != "struct" or not isinstance(fields, list):
        raise UnsupportedSchema("a row schema must be a struct with fields")
    return tuple(
        ColumnSpec(f["field"], compile_codec(f, numeric), bool(f.get("optional")), f.get("default"))
        for f in fields
    )


@dataclass(frozen=True)
class TopicSchema:
    """How the records of one topic decode: row columns, key columns, and the declared table
    (schemaless topics; the Python fallback parser uses it too)."""

    columns: tuple[ColumnSpec, ...]
    key: tuple[ColumnSpec, ...] = ()
    table: TableSpec | None = None
    native: bool = True
    """False for ExtractNewRecordState flat rows, which only the Python path reads."""
    connector: str | None = None
    """The connector of the topic's events (from the sample record), when known."""
    versions: tuple[tuple[int, TopicSchema, bool], ...] = ()
    """With schema changes in the range: each value schema's hash, its own decoding plan, and
    whether its values are checked against the table's columns (false for versions seen only
    after a point-in-time cut); empty when every record has one schema
    (``replay.decode.schema_versions``)."""
    value_prefix: str | None = None
    """The schema text its values start with (``value_prefix``), when read from a record."""

    @classmethod
    def from_connect(
        cls,
        envelope: Mapping[str, Any],
        key: Mapping[str, Any] | None = None,
        *,
        numeric_decimals: bool = False,
        table: TableSpec | None = None,
    ) -> TopicSchema:
        """From an Envelope schema (and a key schema); raises ``UnsupportedSchema``."""
        rows = {f.get("field"): f for f in envelope.get("fields", ()) if isinstance(f, Mapping)}
        row = rows.get("after") or rows.get("before")
        if row is None:
            raise UnsupportedSchema(f"schema {envelope.get('name')!r} is not a change envelope")
        columns = _columns(row, numeric_decimals)
        keys = () if key is None else _columns(key, numeric_decimals)
        return cls(columns, keys, table)

    @classmethod
    def from_table(cls, table: TableSpec, *, numeric_decimals: bool = False) -> TopicSchema:
        """From a declared table (records written without schemas)."""
        key = key_schema(table) if table.key else None
        return cls.from_connect(
            envelope_schema(table), key, numeric_decimals=numeric_decimals, table=table
        )

    @classmethod
    def from_record(
        cls,
        value: bytes,
        key: bytes | None = None,
        table: TableSpec | None = None,
        *,
        topic: str | None = None,
    ) -> TopicSchema:
        """From a sample record of the topic: its schema, else the declared ``table``.

        ExtractNewRecordState flat rows give a schema with ``native`` false. An
        ``UnsupportedSchema`` names ``topic`` when it is given."""
        try:
            return cls._from_record(value, key, table)
        except UnsupportedSchema as exc:
            if topic is None:
                raise
            raise UnsupportedSchema(f"topic {topic}: {exc}") from exc

    @classmethod
    def _from_record(cls, value: bytes, key: bytes | None, table: TableSpec | None) -> TopicSchema:
        schema, payload = _split(loads(value.decode()))
        key_struct, key_payload = _split(None if key is None else loads(key.decode()))
        flat = isinstance(payload, Mapping) and is_flat_row(payload)
        envelope: Mapping[str, Any]
        if schema is None:
            if table is None:
                raise UnsupportedSchema(
                    "its records carry no Connect schema (value.converter.schemas.enable=false): "
                    "declare its columns with --schema FILE (Python: ReplayJob(declared=...))"
                )
            envelope = envelope_schema(table)
            key_struct = key_schema(table) if table.key else None
        elif flat:
            fields = [f for f in schema.get("fields", ()) if not str(f["field"]).startswith("__")]
            envelope = {"fields": [{**schema, "fields": fields, "field": "after"}]}
            payload = {"after": payload}
        else:
            envelope = schema
        if key_struct is None and isinstance(key_payload, Mapping):
            key_struct = _key_from_row(envelope, list(key_payload))
        numeric = _numeric_decimals(envelope, payload)
        source = payload.get("source") if isinstance(payload, Mapping) and not flat else None
        connector = source.get("connector") if isinstance(source, Mapping) else None
        known = connector if isinstance(connector, str) else None
        # The same inputs give the same object: the decoder's expressions, built once per
        # schema object (``expressions.decode_stages``), then serve every --follow round.
        prefix = value_prefix(value) if schema is not None and not flat else None
        signature = (
            dumps(envelope, sort_keys=True), dumps(key_struct, sort_keys=True), numeric, flat,
            known, None if table is None else table.model_dump_json(), prefix,
        )  # fmt: skip
        hit = _FROM_RECORD.get(signature)
        if hit is None:
            found = cls.from_connect(envelope, key_struct, numeric_decimals=numeric, table=table)
            hit = replace(found, native=not flat, connector=known, value_prefix=prefix)
            remember(_FROM_RECORD, signature, hit)
        return hit

    @property
    def versioned(self) -> bool:
        """Whether its records may carry schema versions of their own to look for: not when
        the table is declared (schemaless records) or the rows are flat (decoded in Python)."""
        return self.table is None and self.native

    @property
    def primary_key(self) -> tuple[str, ...]:
        """The key column names."""
        return tuple(c.name for c in self.key)

    def row_type(self) -> T.StructType:
        """The decoded row: every column with its Spark type."""
        return _struct(*((c.name, c.codec.spark) for c in self.columns))

    def value_type(self) -> T.StructType:
        """The ``from_json`` schema of record values (both layouts, plus ``CORRUPT``)."""
        row = _struct(*((c.name, c.codec.raw) for c in self.columns))
        envelope = [("before", row), ("after", row), ("source", SOURCE_TYPE), ("op", _S),
                    ("transaction", TRANSACTION_TYPE)]  # fmt: skip
        return _struct(("payload", _struct(*envelope)), *envelope, (CORRUPT, _S))

    def key_type(self) -> T.StructType:
        """The ``from_json`` schema of record keys (both layouts, plus ``CORRUPT``)."""
        fields = [(c.name, c.codec.raw) for c in self.key]
        return _struct(("payload", _struct(*fields)), *fields, (CORRUPT, _S))


def _split(document: Any) -> tuple[Mapping[str, Any] | None, Any]:
    if isinstance(document, Mapping) and document.keys() == {"schema", "payload"}:
        schema = document["schema"]
        return (schema if isinstance(schema, Mapping) else None), document["payload"]
    return None, document


def _numeric_decimals(envelope: Mapping[str, Any], payload: Any) -> bool:
    rows = {f.get("field"): f for f in envelope.get("fields", ()) if isinstance(f, Mapping)}
    row = rows.get("after") or rows.get("before") or {}
    names = [f.get("field") for f in row.get("fields", ()) if f.get("name") == _DECIMAL]
    images: Sequence[Any] = [payload.get(i) for i in ("after", "before")] if payload else []
    for image in images:
        if isinstance(image, Mapping):
            for name in names:
                if image.get(name) is not None:
                    return not isinstance(image[name], str)
    return False


def _key_from_row(envelope: Mapping[str, Any], names: list[str]) -> dict[str, Any] | None:
    """A key schema of the row columns named by a schemaless key."""
    rows = {f.get("field"): f for f in envelope.get("fields", ()) if isinstance(f, Mapping)}
    row = rows.get("after") or rows.get("before") or {}
    by_name = {f.get("field"): f for f in row.get("fields", ())}
    if not names or any(n not in by_name for n in names):
        return None
    return {"type": "struct", "fields": [by_name[n] for n in names], "optional": False}
