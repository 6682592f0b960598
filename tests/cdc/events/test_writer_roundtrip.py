"""Our own events carry a Connect schema Debezium consumers read, and round-trip exactly."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, timedelta, timezone
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdc.errors import ChangeEventError
from cdc.events import (
    UNAVAILABLE,
    ChangeEvent,
    EventWriter,
    Op,
    PostgresSource,
    RecordKey,
    ReplicatorSource,
    Tombstone,
    envelope_schema,
    parse_key,
    parse_value,
)
from cdc.events.json_text import loads
from cdc.events.schema_builder import REPLICATOR_SOURCE_FIELDS
from cdc.events.unavailable import PLACEHOLDER_TEXT
from tests.cdc.events.conftest import ALL_KINDS_TABLE, all_kinds_row

MakeEvent = Callable[..., ChangeEvent]


def test_envelope_schema_is_what_debezium_consumers_expect() -> None:
    schema = envelope_schema(ALL_KINDS_TABLE)
    assert (schema["name"], schema["version"], schema["type"]) == (
        "replicator.orders_state.Envelope",
        1,
        "struct",
    )
    names = [field["field"] for field in schema["fields"]]
    assert names == ["before", "after", "source", "op", "ts_ms", "ts_us", "ts_ns", "transaction"]
    after = {field["field"]: field for field in schema["fields"][1]["fields"]}
    assert schema["fields"][1]["name"] == "replicator.orders_state.Value"
    assert after["amount"] == {
        "type": "bytes",
        "optional": True,
        "name": "org.apache.kafka.connect.data.Decimal",
        "version": 1,
        "parameters": {"scale": "4", "connect.decimal.precision": "38"},
        "field": "amount",
    }
    logical = {name: (field["type"], field.get("name")) for name, field in after.items()}
    assert logical["day"] == ("int32", "io.debezium.time.Date")
    assert logical["at"] == ("int64", "io.debezium.time.MicroTimestamp")
    assert logical["at_tz"] == ("string", "io.debezium.time.ZonedTimestamp")
    assert logical["clock"] == ("int64", "io.debezium.time.MicroTime")
    assert logical["doc"] == ("string", "io.debezium.data.Json")
    assert logical["ref"] == ("string", "io.debezium.data.Uuid")
    assert logical["ratio"] == ("double", None)
    assert after["id"]["optional"] is False


def test_source_schema_mirrors_the_replicator_source_model() -> None:
    declared = [field["field"] for field in REPLICATOR_SOURCE_FIELDS]
    assert sorted(declared) == sorted(ReplicatorSource.model_fields)
    required = {field["field"] for field in REPLICATOR_SOURCE_FIELDS if not field["optional"]}
    assert required == {
        name for name, info in ReplicatorSource.model_fields.items() if info.is_required()
    } | {"connector"}


def test_round_trip_with_schema(replicator_event: MakeEvent) -> None:
    event = replicator_event()
    raw = EventWriter(ALL_KINDS_TABLE).value(event)
    record = loads(raw.decode())
    assert record["schema"] == envelope_schema(ALL_KINDS_TABLE)
    assert record["payload"]["after"]["amount"] == "wyGQAGjNIX2jL4FpUA4="
    assert record["payload"]["after"]["at_tz"] == "2019-07-09T01:28:10.123456Z"
    parsed = parse_value(raw)
    assert parsed == event
    assert isinstance(parsed, ChangeEvent) and isinstance(parsed.source, ReplicatorSource)
    assert EventWriter(ALL_KINDS_TABLE).value(parsed) == raw


def test_round_trip_without_schema_needs_the_declared_table(replicator_event: MakeEvent) -> None:
    event = replicator_event()
    raw = EventWriter(ALL_KINDS_TABLE, schemas_enable=False).value(event)
    assert b'"schema"' not in raw
    assert parse_value(raw, table=ALL_KINDS_TABLE) == event
    undeclared = parse_value(raw)
    assert isinstance(undeclared, ChangeEvent) and undeclared.after is not None
    assert undeclared.after["amount"] == "wyGQAGjNIX2jL4FpUA4="  # as JSON gives it


@pytest.mark.parametrize("schemas_enable", [True, False])
def test_delete_key_and_tombstone_round_trip(
    replicator_event: MakeEvent, schemas_enable: bool
) -> None:
    writer = EventWriter(ALL_KINDS_TABLE, schemas_enable=schemas_enable)
    event = replicator_event(op=Op.DELETE, after=None, transaction=None, ts_us=None, ts_ns=None)
    assert event.before is not None
    key = writer.key(event.before)
    parsed = parse_value(writer.value(event), key=key, table=ALL_KINDS_TABLE)
    assert isinstance(parsed, ChangeEvent) and parsed.key is not None
    assert parsed.model_copy(update={"key": None}) == event
    assert parsed.key.columns == {"id": 9_007_199_254_740_993}
    tombstone = parse_value(None, key=key, table=ALL_KINDS_TABLE)
    assert tombstone == Tombstone(key=parsed.key)
    expected_name = "replicator.orders_state.Key" if schemas_enable else None
    assert parse_key(key, table=ALL_KINDS_TABLE) == RecordKey(
        columns={"id": 9_007_199_254_740_993}, schema_name=expected_name
    )


def test_zoned_timestamps_are_written_in_utc(replicator_event: MakeEvent) -> None:
    at = all_kinds_row()["at_tz"].astimezone(timezone(timedelta(hours=-7)))
    event = replicator_event(after=all_kinds_row(at_tz=at))
    parsed = parse_value(EventWriter(ALL_KINDS_TABLE).value(event))
    assert isinstance(parsed, ChangeEvent) and parsed.after is not None
    assert parsed.after["at_tz"] == at and parsed.after["at_tz"].tzinfo == UTC


@pytest.mark.parametrize(
    ("column", "value", "reason"),
    [
        ("name", UNAVAILABLE, "never written"),
        ("name", PLACEHOLDER_TEXT, "placeholder"),
        ("qty", 2**31, "int32"),
        ("qty", True, "int32"),
        ("amount", Decimal("1.00001"), "scale"),
        ("amount", 1.5, "expected"),
        ("at", all_kinds_row()["at_tz"], "naive"),
        ("at_tz", all_kinds_row()["at"], "aware"),
        ("day", all_kinds_row()["at"], "datetime"),
        ("ref", "123e4567-e89b-12d3-a456-426614174000", "expected"),
        ("id", None, "required"),
    ],
)
def test_writer_refuses_bad_values(
    replicator_event: MakeEvent, column: str, value: Any, reason: str
) -> None:
    event = replicator_event(after=all_kinds_row(**{column: value}))
    with pytest.raises(ChangeEventError, match=reason) as error:
        EventWriter(ALL_KINDS_TABLE).value(event)
    assert error.value.field == f"after.{column}"


def test_writer_refuses_foreign_events(replicator_event: MakeEvent) -> None:
    writer = EventWriter(ALL_KINDS_TABLE)
    with pytest.raises(ChangeEventError, match="undeclared"):
        writer.value(replicator_event(after={**all_kinds_row(), "extra": 1}))
    with pytest.raises(ChangeEventError, match="ReplicatorSource"):
        writer.value(replicator_event(source=PostgresSource(connector="postgresql", lsn=1)))


json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.text()
    | st.decimals(allow_nan=False, allow_infinity=False)
)
json_documents = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)
row_values = st.fixed_dictionaries(
    {
        "id": st.integers(-(2**63), 2**63 - 1),
        "qty": st.none() | st.integers(-(2**31), 2**31 - 1),
        "ratio": st.none() | st.floats(allow_nan=False),
        "name": st.none() | st.text(),
        "blob": st.none() | st.binary(),
        "amount": st.none() | st.decimals(allow_nan=False, allow_infinity=False, places=4),
        "day": st.none() | st.dates(),
        "at": st.none() | st.datetimes(),
        "at_tz": st.none() | st.datetimes(timezones=st.just(UTC)),
        "clock": st.none() | st.times(),
        "doc": json_documents,
        "ref": st.none() | st.uuids(),
    }
)


@settings(max_examples=150, deadline=None)
@given(after=row_values, schemas_enable=st.booleans())
def test_any_row_round_trips(after: dict[str, Any], schemas_enable: bool) -> None:
    after = {**after, "active": None}
    event = ChangeEvent(
        op=Op.CREATE,
        after=after,
        source=ReplicatorSource(
            table="orders_state",
            processor_id="p",
            input_topic="orders",
            input_partition=0,
            input_offset_start=0,
            input_offset_end=1,
            commit_seq=1,
        ),
    )
    raw = EventWriter(ALL_KINDS_TABLE, schemas_enable=schemas_enable).value(event)
    assert parse_value(raw, table=ALL_KINDS_TABLE) == event
