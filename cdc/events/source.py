"""The ``source`` block of change events: common fields, and one model per known connector.

Unknown fields are kept (``extra="allow"``; read them from ``model_extra``), since connectors add
fields across versions. ``AnySource`` picks the model by the ``connector`` field; connectors
without a model here parse as ``SourceInfo`` (and have no ``position()``).
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    model_validator,
)

from cdc.errors import ChangeEventError
from cdc.events import positions
from cdc.events.positions import SourcePosition

REPLICATOR_CONNECTOR: Final = "replicator"
"""The ``connector`` name of this product's own change events."""


def _snapshot_text(value: Any) -> Any:
    # Debezium < 1.1 wrote booleans; later versions write text ("true", "last", "incremental"...).
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


class SourceInfo(BaseModel):
    """Fields every Debezium connector writes in ``source`` (most are optional here)."""

    model_config = ConfigDict(frozen=True, extra="allow", validate_by_name=True)

    version: str | None = None
    connector: str
    name: str | None = None
    ts_ms: int | None = None
    ts_us: int | None = None
    ts_ns: int | None = None
    snapshot: Annotated[str | None, BeforeValidator(_snapshot_text)] = None
    """Open text: "true", "false", "last", "first", "last_in_data_collection", "incremental"..."""
    db: str | None = None
    sequence: str | None = None
    table: str | None = None

    @property
    def is_snapshot(self) -> bool:
        """True for rows read by a snapshot (initial, or incremental) rather than from the log."""
        return self.snapshot not in (None, "false")

    def position(self) -> SourcePosition:
        """This event's place in its source log; see ``cdc.events.positions``."""
        raise ChangeEventError(
            f"no ordering is known for connector {self.connector!r}", field="source.connector"
        )


class PostgresSource(SourceInfo):
    """``source`` of the PostgreSQL connector."""

    schema_name: str | None = Field(default=None, alias="schema")
    tx_id: int | None = Field(default=None, alias="txId")
    lsn: int | None = None
    xmin: int | None = None

    @property
    def last_commit_lsn(self) -> int | None:
        """The first element of ``sequence``: the LSN of the last commit before this event."""
        return positions.pg_sequence(self.sequence)[0] if self.sequence else None

    def position(self) -> SourcePosition:
        """``(last commit LSN, LSN)``, from ``sequence`` and ``lsn``."""
        return positions.postgres_position(self.lsn, self.sequence)


class MySqlSource(SourceInfo):
    """``source`` of the MySQL and MariaDB connectors."""

    server_id: int | None = None
    gtid: str | None = None
    file: str | None = None
    pos: int | None = None
    row: int | None = None
    thread: int | None = None
    query: str | None = None

    def position(self) -> SourcePosition:
        """``(binlog file number, pos, row)``."""
        return positions.mysql_position(self.file, self.pos, self.row)


class SqlServerSource(SourceInfo):
    """``source`` of the SQL Server connector."""

    schema_name: str | None = Field(default=None, alias="schema")
    change_lsn: str | None = None
    commit_lsn: str | None = None
    event_serial_no: int | None = None

    def position(self) -> SourcePosition:
        """``(commit_lsn, change_lsn, event_serial_no)``."""
        return positions.sqlserver_position(self.commit_lsn, self.change_lsn, self.event_serial_no)


class ReplicatorSource(SourceInfo):
    """``source`` of this product's own events: which processor wrote the state-table row, from
    which input records (offsets ``[input_offset_start, input_offset_end)``, the end being the
    next offset to process), in which of its transactions and commits."""

    connector: Literal["replicator"] = REPLICATOR_CONNECTOR
    table: str
    """The state table name."""
    processor_id: str
    input_topic: str
    input_partition: int = Field(ge=0)
    input_offset_start: int = Field(ge=0)
    input_offset_end: int = Field(ge=0)
    transaction_id: str | None = None
    commit_seq: int = Field(ge=0)

    @model_validator(mode="after")
    def _offsets_ordered(self) -> ReplicatorSource:
        if self.input_offset_end < self.input_offset_start:
            raise ValueError("input_offset_end (the next offset to process) is before the start")
        return self

    def position(self) -> SourcePosition:
        """``(commit_seq,)``: the processor's commits are sequential."""
        return positions.replicator_position(
            self.input_topic, self.input_partition, self.input_offset_end, self.commit_seq
        )


_MODELS: dict[str, type[SourceInfo]] = {
    "postgresql": PostgresSource,
    "mysql": MySqlSource,
    "mariadb": MySqlSource,
    "sqlserver": SqlServerSource,
    REPLICATOR_CONNECTOR: ReplicatorSource,
}
_TAGS = {connector: model.__name__ for connector, model in _MODELS.items()}
SOURCE_TAGS = frozenset({*_TAGS.values(), SourceInfo.__name__})
"""Union tags of ``AnySource`` (model names); they appear in pydantic error locations."""


def _source_tag(value: Any) -> str:
    connector = (
        value.get("connector") if isinstance(value, dict) else getattr(value, "connector", None)
    )
    tag = _TAGS.get(connector) if isinstance(connector, str) else None
    return tag or SourceInfo.__name__


AnySource = Annotated[
    Annotated[PostgresSource, Tag("PostgresSource")]
    | Annotated[MySqlSource, Tag("MySqlSource")]
    | Annotated[SqlServerSource, Tag("SqlServerSource")]
    | Annotated[ReplicatorSource, Tag("ReplicatorSource")]
    | Annotated[SourceInfo, Tag("SourceInfo")],
    Discriminator(_source_tag),
]
"""A source block, validated as the model of its ``connector``."""


def source_model(connector: str) -> type[SourceInfo]:
    """The source model for a connector name (``SourceInfo`` when it has none of its own)."""
    return _MODELS.get(connector, SourceInfo)
