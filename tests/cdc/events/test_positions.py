"""Source positions order the events of one key, so an older event never overwrites a newer row."""

from __future__ import annotations

import pytest

from cdc.errors import ChangeEventError
from cdc.events import MySqlSource, PostgresSource, SourceInfo, SqlServerSource
from cdc.events.positions import (
    SourcePosition,
    binlog_number,
    pg_lsn,
    pg_sequence,
    postgres_position,
    sqlserver_lsn,
)
from tests.cdc.events.conftest import replicator_source


def pg(lsn: int | None, sequence: str | None = None) -> SourcePosition:
    return PostgresSource(connector="postgresql", lsn=lsn, sequence=sequence).position()


def test_postgres_orders_by_last_commit_then_lsn() -> None:
    # Transaction B commits after A, but one of its changes sits earlier in the WAL.
    a_change = pg(500, '["300","500"]')
    b_change = pg(450, '["600","450"]')
    assert b_change > a_change
    assert pg(460, '["600","460"]') > b_change


def test_postgres_null_last_commit_and_missing_sequence_use_the_lsn() -> None:
    snapshot = pg(23911624, '[null,"23911624"]')
    first_streamed = pg(23911952, '[null,"23911952"]')
    assert snapshot < first_streamed
    assert pg(34132560) == postgres_position(34132560, None)
    assert pg(34132560).order == (34132560, 34132560)
    assert pg(None, '["1","2"]').order == (1, 2)  # the LSN from sequence


def test_postgres_sequence_and_lsn_text() -> None:
    assert pg_sequence('["3963198512","3963199336"]') == (3963198512, 3963199336)
    assert pg_lsn("16/B374D848") == (0x16 << 32) | 0xB374D848
    with pytest.raises(ChangeEventError) as error:
        pg_sequence("[1]")
    assert error.value.field == "source.sequence"
    with pytest.raises(ChangeEventError):
        pg(None)


def test_mysql_binlog_files_compare_by_number() -> None:
    def mysql(file: str, pos: int, row: int = 0) -> SourcePosition:
        return MySqlSource(connector="mysql", file=file, pos=pos, row=row).position()

    assert mysql("mysql-bin.000010", 4) > mysql("mysql-bin.000009", 99999)
    assert mysql("mysql-bin.000003", 1041, 1) > mysql("mysql-bin.000003", 1041, 0)
    assert mysql("", 0) < mysql("mysql-bin.000001", 4)  # Flink CDC snapshot rows
    assert binlog_number("mysql-bin.1000000") == 1000000
    with pytest.raises(ChangeEventError):
        binlog_number("mysql-bin")


def test_sqlserver_orders_by_commit_change_and_serial() -> None:
    def sqlserver(commit: str, change: str | None, serial: int) -> SourcePosition:
        source = SqlServerSource(
            connector="sqlserver", commit_lsn=commit, change_lsn=change, event_serial_no=serial
        )
        return source.position()

    first = sqlserver("0000003a:00002f50:0005", "0000003a:00002f50:0002", 1)
    assert sqlserver("0000003a:00002f50:0005", "0000003a:00002f50:0002", 2) > first
    assert sqlserver("0000003a:00002f50:0005", "0000003a:00002f50:0003", 1) > first
    assert sqlserver("0000003b:00000000:0000", "0000003a:00000001:0000", 1) > first
    assert sqlserver_lsn("00000025:00000d98:0002", "f") == 0x0000002500000D980002
    with pytest.raises(ChangeEventError) as error:
        sqlserver_lsn("25:d98:2", "source.commit_lsn")
    assert error.value.field == "source.commit_lsn"


def test_replicator_orders_by_commit_sequence_across_input_partitions() -> None:
    earlier = replicator_source(input_offset_start=100, input_offset_end=105, commit_seq=7)
    later = replicator_source(input_offset_start=105, input_offset_end=106, commit_seq=8)
    assert later.position() > earlier.position()
    assert later.position().is_newer_than(earlier.position())
    assert not earlier.position().is_newer_than(earlier.position())  # a redelivery
    assert earlier.position().is_newer_than(None)
    # Input offsets of other partitions do not matter: the processor commits in sequence.
    other = replicator_source(input_partition=4, input_offset_start=0, input_offset_end=1,
                              commit_seq=9).position()  # fmt: skip
    assert other > later.position()


def test_positions_of_different_connectors_do_not_compare() -> None:
    with pytest.raises(TypeError):
        assert pg(1) < MySqlSource(connector="mysql", file="f.1", pos=1).position()
    with pytest.raises(ChangeEventError):
        SourceInfo(connector="oracle").position()


def test_replicator_input_range_follows_the_offset_convention() -> None:
    with pytest.raises(ValueError, match="next offset"):
        replicator_source(input_offset_start=10, input_offset_end=9)
    assert replicator_source(input_offset_start=10, input_offset_end=10).input_offset_end == 10
