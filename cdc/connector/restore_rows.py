"""The restore fast path: a changelog record of this processor straight to its store write.

Restoring needs only the newest image of each key. For the records a processor wrote itself
(its ``EventWriter``'s exact layout, with or without the schema) this reads the ``after`` image
out of the payload with orjson and the table's compiled row decoder, without building and
validating a ``ChangeEvent``. Anything else (deletes, truncates, tombstones, records in another
layout, rows that do not decode) is left to ``ChangelogConnector.decode``, which reports bad input.
"""

from __future__ import annotations

from cdc import json_bytes
from cdc.events.columns import TableSpec
from cdc.events.connect_schema import compile_schema
from cdc.events.field_errors import FieldError
from cdc.events.schema_builder import value_schema
from cdc.state.changes import Row

_AFTER_OPS = frozenset({"c", "u", "r"})
_BARE_HEAD = b'{"before":'


class AfterImageReader:
    """Reads the ``after`` row of one table's own change events (``value_head``: what a value
    carrying the schema starts with, as ``EventWriter.value_head``)."""

    __slots__ = ("_decode", "_head", "_head_size")

    def __init__(self, spec: TableSpec, value_head: bytes) -> None:
        self._decode = compile_schema(value_schema(spec)).decode
        self._head = value_head
        self._head_size = len(value_head)

    def after(self, value: bytes) -> Row | None:
        """The decoded ``after`` row of a create, update or read event in our own layout;
        None for anything else."""
        if value.startswith(self._head) and value.endswith(b"}"):
            body: bytes | memoryview = memoryview(value)[self._head_size : -1]
        elif value.startswith(_BARE_HEAD):
            body = value
        else:
            return None
        try:
            payload = json_bytes.loads_unchecked(body)
        except ValueError:
            return None
        if type(payload) is not dict or payload.get("op") not in _AFTER_OPS:
            return None
        after = payload.get("after")
        if type(after) is not dict:
            return None
        if json_bytes.has_float(after):  # maybe an int beyond 64 bits: json reads it exactly
            after = json_bytes.loads(body)["after"]
        try:
            row: Row = self._decode(after)
        except FieldError:
            return None
        return row
