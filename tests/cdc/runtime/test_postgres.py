"""The local PostgreSQL launcher: logical replication, an unprivileged server, one-line errors."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cdc.errors import SetupError
from cdc.runtime.pg_client import PgEndpoint, connect, current_wal_lsn, emit_logical_message
from cdc.runtime.postgres import LocalPostgres, find_bin_dir


def test_a_dsn_round_trips_through_its_parts() -> None:
    endpoint = PgEndpoint("127.0.0.1", 5433, "us er", "p@ss:/word", "my db")
    assert PgEndpoint.from_dsn(endpoint.dsn) == endpoint


def test_a_key_value_dsn_names_the_expected_form() -> None:
    with pytest.raises(SetupError, match=r"not a PostgreSQL URI: write postgresql://"):
        PgEndpoint.from_dsn("host=127.0.0.1 user=cdc")


def test_missing_binaries_name_the_fix(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("REPLICATOR_PG_BIN", str(tmp_path))
    with pytest.raises(SetupError, match=r"not found in .*apt-get install postgresql"):
        find_bin_dir()


@pytest.mark.skipif(os.geteuid() != 0, reason="only root hands the cluster to another user")
def test_a_directory_the_server_user_cannot_reach_names_the_fix(tmp_path: Path) -> None:
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    with pytest.raises(SetupError, match=r"cannot write .*world-searchable"):
        LocalPostgres(private / "pg").start()


@pytest.mark.integration
def test_the_cluster_is_ready_for_logical_replication(postgres: LocalPostgres) -> None:
    names = ("wal_level", "listen_addresses", "max_replication_slots", "max_wal_senders")
    with connect(postgres.dsn) as conn:
        found = conn.execute(
            "SELECT name, setting FROM pg_settings WHERE name = ANY(%s)", (list(names),)
        ).fetchall()
        role = conn.execute(
            "SELECT rolreplication, rolsuper FROM pg_roles WHERE rolname = current_user"
        ).fetchone()
    assert dict(found) == {
        "wal_level": "logical",
        "listen_addresses": "127.0.0.1",
        "max_replication_slots": "16",
        "max_wal_senders": "16",
    }
    assert role == (True, False)
    if os.geteuid() == 0:
        assert postgres.pgdata.stat().st_uid != 0


@pytest.mark.integration
def test_logical_messages_and_the_wal_position_are_integer_lsns(postgres: LocalPostgres) -> None:
    before = current_wal_lsn(postgres.dsn)
    first = emit_logical_message(postgres.dsn, "test", "hello")
    second = emit_logical_message(postgres.dsn, "test", "again")
    assert before <= first < second


@pytest.mark.integration
def test_a_restarted_cluster_keeps_its_data_and_port() -> None:
    with LocalPostgres() as pg:
        with connect(pg.dsn) as conn:
            conn.execute("CREATE TABLE kept (x int)")
            conn.execute("INSERT INTO kept VALUES (42)")
        port = pg.port
        pg.stop()
        pg.start()
        assert pg.port == port
        with connect(pg.dsn) as conn:
            assert conn.execute("SELECT x FROM kept").fetchall() == [(42,)]
        data_dir = pg.data_dir
    assert not data_dir.exists()


@pytest.mark.integration
def test_a_stopped_cluster_is_a_one_line_connect_error() -> None:
    with LocalPostgres() as pg:
        pg.stop()
        with pytest.raises(SetupError, match=r"cannot connect to PostgreSQL cdc at 127\.0\.0\.1:"):
            connect(pg.dsn)
