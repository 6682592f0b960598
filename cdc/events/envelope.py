"""The Debezium change-event envelope, record keys, tombstones, and the parse result union.

Row images (``before``/``after``) are plain dicts of decoded column values: ``int``, ``float``,
``bool``, ``str``, ``bytes``, ``Decimal``, ``date``/``time``/``datetime``, ``UUID``, parsed JSON,
lists and dicts, or ``UNAVAILABLE`` for a column Debezium could not read. Treat them as read-only.
"""

from __future__ import annotations

import enum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from cdc.events.positions import SourcePosition
from cdc.events.schema_change import SchemaChangeEvent
from cdc.events.source import AnySource
from cdc.events.transaction import TransactionBlock, TransactionEvent
from cdc.events.unavailable import unavailable_columns

Row = dict[str, Any]
"""One row image: column name to decoded value."""


class Op(enum.StrEnum):
    """The ``op`` of a change event."""

    CREATE = "c"
    UPDATE = "u"
    DELETE = "d"
    READ = "r"
    """A snapshot read."""
    TRUNCATE = "t"
    MESSAGE = "m"
    """A logical decoding message (PostgreSQL ``pg_logical_emit_message``)."""


_NEEDS_AFTER = frozenset({Op.CREATE, Op.UPDATE, Op.READ})


class LogicalMessage(BaseModel):
    """The ``message`` of an ``op: "m"`` event (``content`` is bytes when a schema says so)."""

    model_config = ConfigDict(frozen=True, extra="allow")

    prefix: str
    content: bytes | str | None = None


class RecordKey(BaseModel):
    """A decoded record key: the key columns, and the key schema's name when it had one."""

    model_config = ConfigDict(frozen=True)

    columns: dict[str, Any]
    schema_name: str | None = None


class ChangeEvent(BaseModel):
    """One change of one row: ``op``, row images, ``source`` block, timestamps, transaction.

    ``key`` is the record's decoded key when the caller passed it. ``unwrapped`` marks events
    read from ExtractNewRecordState flat rows (see ``cdc.events.unwrap``).
    """

    model_config = ConfigDict(frozen=True, extra="allow")

    kind: Literal["change"] = "change"
    op: Op
    before: Row | None = None
    after: Row | None = None
    source: AnySource
    ts_ms: int | None = None
    ts_us: int | None = None
    ts_ns: int | None = None
    transaction: TransactionBlock | None = None
    message: LogicalMessage | None = None
    key: RecordKey | None = None
    unwrapped: bool = False

    @field_validator("after")
    @classmethod
    def _after_matches_op(cls, after: Row | None, info: ValidationInfo) -> Row | None:
        op = info.data.get("op")
        if after is None and op in _NEEDS_AFTER:
            raise ValueError(f"op {op.value!r} needs an after row")
        if after is not None and op == Op.DELETE:
            raise ValueError("a delete has no after row")
        return after

    @property
    def row(self) -> Row | None:
        """The row image this event leaves: ``after``, or ``before`` for a delete."""
        return self.before if self.op == Op.DELETE else self.after

    @property
    def unavailable_columns(self) -> frozenset[str]:
        """Columns of ``after`` whose value is unknown (keep the previous value for them)."""
        return unavailable_columns(self.after)

    def position(self) -> SourcePosition:
        """Where this event sits in its source log (see ``cdc.events.positions``)."""
        return self.source.position()


class Tombstone(BaseModel):
    """A record with a null value: after a delete, it lets log compaction drop the key."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["tombstone"] = "tombstone"
    key: RecordKey | None = None


ParsedValue = Annotated[
    ChangeEvent | Tombstone | TransactionEvent | SchemaChangeEvent, Field(discriminator="kind")
]
"""What ``parse_value`` returns; match on the class, or on ``kind``."""
