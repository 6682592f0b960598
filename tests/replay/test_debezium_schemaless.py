"""Debezium's PostgreSQL connector with ``value.converter.schemas.enable=false`` (and the key
converter's too), in each ``decimal.handling.mode``, mirrored by ``replicator replay --schema``
into DuckDB and Delta: the replica equals the database.

One PostgreSQL database and one capture per mode; the workload is the mirror test's (snapshot
rows, inserts, updates, deletes, key changes, a TRUNCATE; numeric(12,2), date, timestamptz, text,
boolean, jsonb, uuid), its topics hold records without any Connect schema, so the columns come
from the declaration file, as a user would write it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cdc.runtime.postgres import LocalPostgres
from replay.cli.main import main
from replay.sinks.registry import open_sink
from replay.tables.engine import target_table
from tests.cdc.runtime.pg_workload import ACCOUNTS, ENTRIES, TABLES
from tests.replay.debezium_source import (
    State,
    assert_rows_equal,
    captured_database,
    database_state,
    mirror_rows,
)

pytestmark = pytest.mark.integration

MODES = ("precise", "string", "double")


def declarations(prefix: str, mode: str) -> dict[str, Any]:
    """The ``--schema`` document of the two captured tables."""
    money = {"type": "decimal", "scale": 2, "precision": 12}
    return {
        f"{prefix}.{ACCOUNTS}": {
            "key": ["id"],
            "decimal.handling.mode": mode,
            "columns": {
                "id": "int32", "owner": "string", "balance": money, "opened": "date",
                "active": "boolean", "updated_at": "timestamp-tz", "profile": "json",
                "external_id": "uuid",
            },
        },
        f"{prefix}.{ENTRIES}": {
            "key": ["account_id", "seq"],
            "decimal.handling.mode": mode,
            "columns": {
                "account_id": "int32", "seq": "int32", "amount": money, "memo": "string",
                "booked_at": "timestamp-tz", "booked_on": "date",
            },
        },
    }  # fmt: skip


@pytest.fixture(scope="module", params=MODES)
def captured(
    request: pytest.FixtureRequest,
    postgres: LocalPostgres,
    kafka_bootstrap: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[str, str, State]]:
    """(mode, topic prefix, the database's final rows) of a schemaless capture in ``mode``."""
    mode = str(request.param)
    options, conn, workload, capture = captured_database(
        postgres, kafka_bootstrap, tmp_path_factory.mktemp(f"capture-{mode}"), "less",
        seed=20251125, accounts=12, entries=30, schemas_enable=False, partitions=2,
        properties={"decimal.handling.mode": mode},
    )  # fmt: skip
    try:
        capture.wait_caught_up()
        workload.run(transactions=40)
        workload.change_keys()
        workload.truncate_entries()
        workload.run(transactions=30)
        end = database_state(conn)
        capture.wait_caught_up()
        yield mode, options.topic_prefix, end
    finally:
        capture.stop()
        conn.close()


@pytest.mark.parametrize("kind", ["duckdb", "delta"])
def test_a_schemaless_capture_mirrors_the_database_with_a_schema_file(
    captured: tuple[str, str, State], spark: Any, kafka_bootstrap: str, tmp_path: Path, kind: str
) -> None:
    mode, prefix, end = captured
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(declarations(prefix, mode), indent=2))
    sink_url = f"{kind}://{tmp_path}/mirror" + (".duckdb" if kind == "duckdb" else "")
    pattern = prefix.replace("-", "\\-") + r"\.public\..*"
    argv = ["replay", "--stream", f"kafka://{kafka_bootstrap}", "--sink", sink_url,
            "--topics", pattern, "--schema", str(schema)]  # fmt: skip
    assert main(argv) == 0
    sink = open_sink(sink_url, spark)
    try:
        for table in TABLES:
            topic = f"{prefix}.{table}"
            rows = mirror_rows(sink, target_table(topic), table)
            assert_rows_equal(rows, end[table], f"{mode} {kind} {table}")
    finally:
        sink.close()
    assert end[ACCOUNTS] and end[ENTRIES]


def test_without_a_declaration_the_error_names_the_topic(
    captured: tuple[str, str, State], kafka_bootstrap: str, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    _, prefix, _ = captured
    topic = f"{prefix}.{ACCOUNTS}"
    argv = ["replay", "--stream", f"kafka://{kafka_bootstrap}", "--sink",
            f"duckdb://{tmp_path}/m.duckdb", "--topics", topic]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"replicator replay: topic {topic}: its records carry no Connect schema")
    assert "--schema FILE" in err
