"""Factories for the change-event tests: published Debezium records, and our own events."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime, time
from decimal import Decimal
from typing import Any
from uuid import UUID

import pytest

from cdc.events import (
    ChangeEvent,
    Column,
    ColumnKind,
    Op,
    ReplicatorSource,
    TableSpec,
    TransactionBlock,
    parse_value,
)
from tests.conftest import DEBEZIUM_FIXTURES

PUBLISHED = DEBEZIUM_FIXTURES
"""Real Debezium records, in the repository (``tests/fixtures/debezium``, see its SOURCES.md)."""


def published_names() -> list[str]:
    """File names of the published records."""
    return sorted(path.name for path in PUBLISHED.glob("*.json"))


@pytest.fixture
def published() -> Callable[[str], bytes]:
    """Factory: the bytes of one published record, by file name."""
    return lambda name: (PUBLISHED / name).read_bytes()


ALL_KINDS_TABLE = TableSpec(
    server="replicator",
    table="orders_state",
    columns=(
        Column(name="id", type=ColumnKind.INT64, optional=False),
        Column(name="qty", type=ColumnKind.INT32),
        Column(name="ratio", type=ColumnKind.FLOAT64),
        Column(name="active", type=ColumnKind.BOOLEAN),
        Column(name="name", type=ColumnKind.STRING),
        Column(name="blob", type=ColumnKind.BYTES),
        Column(name="amount", type=ColumnKind.DECIMAL, scale=4, precision=38),
        Column(name="day", type=ColumnKind.DATE),
        Column(name="at", type=ColumnKind.TIMESTAMP),
        Column(name="at_tz", type=ColumnKind.TIMESTAMP_TZ),
        Column(name="clock", type=ColumnKind.TIME),
        Column(name="doc", type=ColumnKind.JSON),
        Column(name="ref", type=ColumnKind.UUID),
    ),
    key=("id",),
)


def all_kinds_row(**changes: Any) -> dict[str, Any]:
    """A row of ``ALL_KINDS_TABLE`` with a value of every kind (``changes`` replace some)."""
    row: dict[str, Any] = {
        "id": 9_007_199_254_740_993,
        "qty": -2_147_483_648,
        "ratio": 0.1,
        "active": True,
        "name": "Big 2-wheel scooter ",
        "blob": b"\x00\xffbytes",
        "amount": Decimal("-123456789012345678901234567890.1234"),
        "day": date(1969, 12, 31),
        "at": datetime(2019, 7, 9, 1, 28, 10, 123456),
        "at_tz": datetime(2019, 7, 9, 1, 28, 10, 123456, tzinfo=UTC),
        "clock": time(23, 59, 59, 999999),
        "doc": {"n": Decimal("123456789876543212345678987654321.110"), "list": [1, None, "x"]},
        "ref": UUID("123e4567-e89b-12d3-a456-426614174000"),
    }
    row.update(changes)
    return row


def replicator_source(**changes: Any) -> ReplicatorSource:
    """A source block of our own connector (``changes`` replace fields)."""
    fields: dict[str, Any] = {
        "version": "0.1.0",
        "name": "replicator",
        "ts_ms": 1_700_000_000_000,
        "db": "state",
        "table": "orders_state",
        "processor_id": "proc-1",
        "input_topic": "orders",
        "input_partition": 3,
        "input_offset_start": 100,
        "input_offset_end": 105,
        "transaction_id": "proc-1-txn-7",
        "commit_seq": 7,
    }
    fields.update(changes)
    return ReplicatorSource(**fields)


@pytest.fixture
def replicator_event() -> Callable[..., ChangeEvent]:
    """Factory: one of our own change events (keyword arguments replace envelope fields)."""

    def make(**changes: Any) -> ChangeEvent:
        fields: dict[str, Any] = {
            "op": Op.UPDATE,
            "before": all_kinds_row(qty=1, doc=None),
            "after": all_kinds_row(),
            "source": replicator_source(),
            "ts_ms": 1_700_000_000_123,
            "ts_us": 1_700_000_000_123_456,
            "ts_ns": 1_700_000_000_123_456_789,
            "transaction": TransactionBlock(
                id="proc-1-txn-7", total_order=2, data_collection_order=1
            ),
        }
        fields.update(changes)
        return ChangeEvent(**fields)

    return make


def change_event(raw: Any, **kwargs: Any) -> ChangeEvent:
    """``parse_value(raw, **kwargs)``, asserted to be a change event."""
    event = parse_value(raw, **kwargs)
    assert isinstance(event, ChangeEvent)
    return event
