"""Our own changelog (``ChangelogConnector.encode``) decodes natively, with schemas on and off,
to the rows that were written, and the Python path agrees."""

from __future__ import annotations

from typing import Any

import pytest

from cdc.connector.spec import table_spec
from replay.decode.changes import decode_native
from replay.decode.fallback import decode_python
from replay.decode.schema import TopicSchema
from replay.sinks.protocol import OP, POS
from tests.replay.decode.conftest import (
    ACCOUNTS,
    Changelog,
    account,
    by_offset,
    comparable,
    raw_frame,
)

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("schemas_enable", [True, False])
def test_changelog_records_decode_to_the_written_rows(spark: Any, schemas_enable: bool) -> None:
    log = Changelog(schemas_enable=schemas_enable)
    first, second = account(1), account(2, doc=None, blob=None, name="two")
    log.upsert(None, first)
    log.upsert(None, second)
    updated = account(1, balance=first["balance"] + 1, score=-0.25, active=False)
    log.upsert(first, updated)
    log.delete(second)
    newest = [r for r in log.records if r[4] is not None][-1]
    spec = table_spec("proc", ACCOUNTS)
    schema = TopicSchema.from_record(newest[4] or b"", newest[3], None if schemas_enable else spec)
    assert schema.primary_key == ("id",)
    frame = raw_frame(spark, log.records)
    decoded = decode_native(frame, schema)
    rows = by_offset(decoded.good.collect())
    assert decoded.bad.count() == 0
    assert [r[OP] for r in rows] == ["u", "u", "u", "d"]
    assert [comparable(r) for r in rows] == [
        comparable(x) for x in (first, second, updated, second)
    ]
    assert [r[POS] for r in rows] == sorted(r[POS] for r in rows)
    assert rows[0]["__txn"] == "proc:1" and rows[0]["__source"]["commit_seq"] == 1
    python = by_offset(decode_python(frame, schema).good.collect())
    assert [comparable(r) for r in python] == [comparable(r) for r in rows]
    assert [(r[OP], r[POS], r["__txn"]) for r in python] == [
        (r[OP], r[POS], r["__txn"]) for r in rows
    ]


def test_one_schema_object_per_schema_so_follow_rounds_reuse_the_decoder() -> None:
    """Records of one schema give the same ``TopicSchema`` (the decoder's expressions are built
    once per schema object); another declaration or another schema gives another."""
    on, off = Changelog(), Changelog(schemas_enable=False)
    for log in (on, off):
        log.upsert(None, account(1))
        log.upsert(account(1), account(1, name="renamed"))
    first, second = ((r[4], r[3]) for r in on.records)
    assert first[0] is not None and second[0] is not None
    schema = TopicSchema.from_record(first[0], first[1])
    assert TopicSchema.from_record(second[0], second[1]) is schema
    declared = table_spec("proc", ACCOUNTS)
    value, key = off.records[-1][4], off.records[-1][3]
    assert value is not None
    from_declared = TopicSchema.from_record(value, key, declared)
    assert from_declared is TopicSchema.from_record(off.records[0][4] or b"", key, declared)
    assert from_declared is not schema
    renamed = declared.model_copy(update={"table": "other"})
    assert TopicSchema.from_record(value, key, renamed) is not from_declared
