"""Point-in-time cuts by source position are inclusive and never split a source transaction."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cdc.state.changes import CapturedChange
from replay.decode.changes import decode_native
from replay.decode.cut import cut_at
from replay.decode.schema import TopicSchema
from replay.reading.bounds import parse_bound
from tests.replay.decode.conftest import (
    ACCOUNTS,
    Changelog,
    account,
    as_records,
    published,
    raw_frame,
)

pytestmark = pytest.mark.integration


def _kept(spark: Any, values: list[bytes], bound: str) -> list[int]:
    schema = TopicSchema.from_record(values[-1])
    decoded = decode_native(raw_frame(spark, as_records("t", [(None, v) for v in values])), schema)
    cut = cut_at(decoded.good, parse_bound(bound, stop=True))
    return sorted(r["__offset"] for r in cut.collect())


def _pg(lsn: int, txn: str | None) -> bytes:
    document = json.loads(published("pg_1x_create_with_schema.json"))
    payload = document["payload"]
    payload["source"] = {**payload["source"], "lsn": lsn, "txId": lsn}
    payload["transaction"] = None if txn is None else {"id": txn, "total_order": 1,
                                                       "data_collection_order": 1}  # fmt: skip
    return json.dumps(document).encode()


def test_lsn_cut_keeps_whole_transactions_at_or_before_it(spark: Any) -> None:
    values = [
        _pg(100, "a"),  # 0: transaction a, wholly before the cut
        _pg(150, "b"),  # 1: transaction b starts before the cut ...
        _pg(250, "a"),  # 2: ... a ends exactly at the cut (inclusive)
        _pg(300, "b"),  # 3: ... and b ends after it: all of b goes
        _pg(240, None),  # 4: no transaction id: judged alone
        _pg(251, None),  # 5
    ]
    assert _kept(spark, values, "lsn:250") == [0, 2, 4]
    assert _kept(spark, values, "lsn:0/12C") == [0, 1, 2, 3, 4, 5]  # 0/12C = 300


def _mysql(file: str, pos: int) -> bytes:
    document = json.loads(published("mysql_1x_update_with_schema.json"))
    document["payload"]["source"] = {**document["payload"]["source"], "file": file, "pos": pos,
                                     "gtid": None}  # fmt: skip
    return json.dumps(document).encode()


def test_binlog_cut_orders_files_by_number(spark: Any) -> None:
    values = [_mysql("mysql-bin.000009", 99_999), _mysql("mysql-bin.000010", 500),
              _mysql("mysql-bin.000010", 501), _mysql("mysql-bin.000100", 4)]  # fmt: skip
    assert _kept(spark, values, "binlog:mysql-bin.000010:500") == [0, 1]


def test_txn_cut_of_our_changelog_and_a_foreign_connector(spark: Any) -> None:
    log = Changelog(partitions=2)
    txns = []
    for seq in range(1, 5):
        changes = [CapturedChange.between(ACCOUNTS.name, {"id": i}, None, account(i))
                   for i in range(seq * 10, seq * 10 + 3)]  # fmt: skip
        txns.append(log.commit(*changes))
    newest = log.records[-1]
    schema = TopicSchema.from_record(newest[4] or b"", newest[3])
    decoded = decode_native(raw_frame(spark, log.records), schema).good
    kept = cut_at(decoded, parse_bound(f"txn:{txns[1]}", stop=True)).collect()
    assert sorted(r["id"] for r in kept) == [10, 11, 12, 20, 21, 22]
    with pytest.raises(Exception, match="lsn cut cannot place"):
        cut_at(decoded, parse_bound("lsn:100", stop=True)).collect()
