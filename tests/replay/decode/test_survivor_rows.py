"""The compaction task's decoder gives the Python path's rows: published Debezium records (in
the compact layout JsonConverter writes), our own changelog, bad records; it reads the common
shape itself and leaves the rest, and the wording of every error, to the parser."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cdc.connector.spec import table_spec
from cdc.events import ChangeEventReader
from cdc.events.json_text import dumps, loads
from replay.decode import survivor_rows
from replay.decode.changes import DECODED_META, TXN
from replay.decode.fallback import decoded_row
from replay.decode.schema import TopicSchema
from replay.decode.survivor_rows import SurvivorDecoder
from tests.replay.decode.conftest import ACCOUNTS, Changelog, account, published
from tests.replay.decode.test_bad_input import CASES, KEY, VALUE
from tests.replay.decode.test_published import TOPICS

pytestmark = pytest.mark.integration
_TXN = DECODED_META.index(TXN)
NUMERIC_DECIMALS = {"mysql.alltypes"}
"""Topics whose decimals are JSON numbers (``decimal.format=NUMERIC``)."""


class _Counted:
    """``decoded_row`` counting its calls (the values the short way left to the parser)."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, *args: Any) -> Any:
        self.calls += 1
        return decoded_row(*args)


def _compact(value: bytes) -> bytes:
    """A record as JsonConverter writes it: no whitespace, numbers digit for digit (a value
    that is not JSON as it is)."""
    try:
        return dumps(loads(value.decode())).encode()
    except ValueError:
        return value


def _same_rows(schema: TopicSchema, pairs: list[tuple[bytes | None, bytes]]) -> _Counted:
    """Asserts the decoder's rows equal ``decoded_row``'s but for ``__txn`` (a rebuild does
    not read it: the short way leaves it null); returns the parser's calls, counted."""
    reader, counted = ChangeEventReader(schema.table), _Counted()
    decoder = SurvivorDecoder(schema)
    txn = len(schema.columns) + _TXN
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(survivor_rows, "decoded_row", counted)
        for offset, (key, value) in enumerate(pairs):
            origin, carried = ("t", 3, offset, key), (offset % 2 == 0, False)
            got = decoder.row(origin, value, carried)
            want = decoded_row(reader, schema, origin, value, carried)
            if got is None or want is None:
                assert got is want, (offset, got, want)
                continue
            if got[txn] is None:
                want = (*want[:txn], None, *want[txn + 1 :])
            assert got == want, offset
    return counted


@pytest.mark.parametrize("topic", sorted(TOPICS))
def test_published_records_decode_as_the_parser_reads_them(topic: str) -> None:
    pairs = [
        (None if k is None else published(k), _compact(published(v)))
        for v, k in TOPICS[topic]
        if v is not None
    ]
    key, newest = pairs[-1]
    schema = TopicSchema.from_record(newest, key)
    counted = _same_rows(schema, pairs)
    if topic in NUMERIC_DECIMALS:  # the parser reads them as Decimal, orjson as float
        assert counted.calls == len(pairs)
    else:  # the newest record's schema text is the topic's: the short way reads it
        assert counted.calls < len(pairs), "every record went the parser's way"


@pytest.mark.parametrize("schemas_enable", [True, False])
def test_our_changelog_decodes_the_short_way(schemas_enable: bool) -> None:
    log = Changelog(schemas_enable=schemas_enable)
    first, second = account(1, score=None), account(2, doc=None, blob=None, score=None)
    log.upsert(None, first)
    log.upsert(None, second)
    log.upsert(first, account(1, balance=first["balance"] + 1, active=False, score=None))
    log.delete(second)
    pairs = [(r[3], r[4]) for r in log.records if r[4] is not None]
    spec = None if schemas_enable else table_spec("proc", ACCOUNTS)
    schema = TopicSchema.from_record(pairs[-1][1], pairs[-1][0], spec)
    assert _same_rows(schema, pairs).calls == 0
    log.upsert(None, account(3, score=-0.1))  # a float column: orjson's float is float(Decimal)
    assert _same_rows(schema, [(log.records[-1][3], log.records[-1][4] or b"")]).calls == 0


def test_bad_records_are_worded_by_the_parser() -> None:
    schema = TopicSchema.from_record(_compact(published(VALUE)), KEY)
    pairs = [(k, v) for k, v, _ in CASES if v is not None]
    counted = _same_rows(schema, [(k, _compact(v)) for k, v in pairs])
    # Read the short way: the good record, and the one whose position the JVM finds missing
    assert counted.calls == len(pairs) - 2


def _emp(change: Any) -> bytes:
    document = json.loads(published(VALUE))
    change(document["payload"])
    return _compact(json.dumps(document).encode())


@pytest.mark.parametrize(
    "change",
    [
        lambda p: p["before"].update(sal_float=1.5),  # a float: the parser reads a Decimal
        lambda p: p["source"].update(commit_lsn=7),  # a source field of another JSON type
        lambda p: p["source"].update(event_serial_no=True),
        lambda p: p.update(op="t", before=None),  # a truncate
        lambda p: p["before"].update(empno=None),  # a key column from the record key
        lambda p: p.update(op="c", after=p["before"], before=None),
        lambda p: p["before"].update(empno=2**31),  # out of int32's range: a bad record
        lambda p: p.update(ts_ms="x"),  # the parser's models refuse it, a rebuild reads it not
    ],
)
def test_values_off_the_common_shape_decode_as_the_parser_reads_them(change: Any) -> None:
    schema = TopicSchema.from_record(_compact(published(VALUE)), KEY)
    assert schema.value_prefix is not None
    _same_rows(schema, [(KEY, _emp(change))])


def test_values_the_schema_text_does_not_lead_go_the_parsers_way() -> None:
    schema = TopicSchema.from_record(_compact(published(VALUE)), KEY)
    document = loads(_compact(published(VALUE)).decode())
    bare = dumps(document["payload"]).encode()  # no schema: its images cannot be decoded
    after = _compact(published(VALUE))[:-1] + b',"x":1}'  # a member after the payload
    counted = _same_rows(schema, [(KEY, bare), (KEY, after)])
    assert counted.calls == 2
    rows = [SurvivorDecoder(schema).row(("t", 0, i, KEY), v, ()) for i, v in enumerate([bare])]
    assert rows[0] is not None and rows[0][len(schema.columns) + len(DECODED_META)] is not None
