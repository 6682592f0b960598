"""Finding the distinct value schemas of a range of records (``find_versions``).

Each record's ``schema`` text (JsonConverter writes it first, compact; other writers may add
spaces) is hashed with Spark's ``xxhash64``; one aggregation lists the distinct hashes, where each
is first and last seen, and one value of each, whose schema is compiled to a decoding plan. A small
range the driver has read already (a ``--follow`` round, a small catch-up) is scanned in Python
instead, without a Spark job: each distinct schema text hashed once with the same XXH64
(``replay.decode.xxhash64``), and remembered, since the rounds of a follow see the same few schemas
again and again. A compact schema is cut from the value's bytes, as Spark cuts and hashes the bytes
of a binary cast to string (no UTF-8 check there either); a record whose value starts with the
previous record's schema and delimiter is not cut again (one comparison of the prefix). The
decoding plan of a (hash, base schema) is built once and the same object returned after, so its
Spark expressions are built once too (``replay.decode.expressions``).
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from cdc.events.json_text import loads
from replay.decode.schema import TopicSchema, remember, value_prefix
from replay.decode.xxhash64 import xxhash64
from replay.reading.sources import whole_value
from replay.spark import Column, DataFrame, F

_HEAD = '{"schema":'
_DELIMITER = ',"payload":'
_SPACED = r'(?s)^\{\s*"schema"\s*:(.*?),\s*"payload"\s*:'
# The same pattern for Python, with Java's \s (Python's also takes Unicode spaces).
_SPACED_PY = re.compile(_SPACED.replace(r"\s", r"[ \t\n\x0b\f\r]"))
_known_versions: OrderedDict[tuple[int, int, bool], tuple[TopicSchema, TopicSchema]] = OrderedDict()
_HEAD_BYTES, _DELIMITER_BYTES = (_HEAD + "{").encode(), _DELIMITER.encode()
_known_hashes: OrderedDict[bytes, int] = OrderedDict()
"""Schema texts (UTF-8 bytes) hashed before, with their hash."""


@dataclass(frozen=True)
class SchemaVersion:
    """One distinct value schema of a topic: its hash, the decoding plan, and where it is
    first and last seen (``partition:offset``)."""

    hash: int
    schema: TopicSchema
    first: str
    last: str


def schema_hash(value: Column) -> Column:
    """The hash of a record's ``schema`` text; 0 for a value without one."""
    text = value.cast("string")
    compact = F.substring_index(text, _DELIMITER, 1)
    spaced = F.regexp_extract(text, _SPACED, 1)
    return (
        F.when(text.startswith(_HEAD + "{"), F.xxhash64(compact))
        .when(spaced != "", F.xxhash64(spaced))
        .otherwise(F.lit(0).cast("long"))
    )


def _schema_bytes(value: bytes) -> bytes | None:
    """What ``schema_hash`` hashes, in Python: None for a value without a schema. Raises
    UnicodeDecodeError for a value written with spaces that is not UTF-8 (the pattern runs on
    text; the Spark scan handles those)."""
    if value.startswith(_HEAD_BYTES):
        return value.split(_DELIMITER_BYTES, 1)[0]
    spaced = _SPACED_PY.match(value.decode())
    return spaced.group(1).encode() if spaced and spaced.group(1) else None


def find_versions(
    records: Callable[[], DataFrame], base: TopicSchema, *, numeric_decimals: bool = False,
    rows: Sequence[Sequence[Any]] | None = None,
) -> list[SchemaVersion]:  # fmt: skip
    """The distinct value schemas of the ``records()`` (RAW_SCHEMA), oldest first (by the newest
    timestamp at which each is seen); records without a schema are left out. ``rows``: the
    same records on the driver, when it read them (then scanned there, see the module doc, and
    ``records`` is not called: handing the rows to Spark costs about a second per 100,000)."""
    found = None if rows is None else _scan_rows(rows)
    if found is None:
        frame = records()
        whole = whole_value(frame)
        hashed = frame.where(whole.isNotNull()).select(
            schema_hash(whole).alias("h"),
            F.struct("timestamp_ms", "partition", "offset").alias("at"),
            whole.alias("value"),
        )
        aggregated = (
            hashed.where(F.col("h") != 0)
            .groupBy("h")
            .agg(F.min("at").alias("first"), F.max("at").alias("last"), F.first("value").alias("v"))
            .collect()
        )
        found = [(int(r["h"]), tuple(r["first"]), tuple(r["last"]), bytes(r["v"]))
                 for r in aggregated]  # fmt: skip
    versions: list[SchemaVersion] = []
    for h, first, last, value in sorted(found, key=lambda f: f[2]):
        where = (f"partition {at[1]} offset {at[2]}" for at in (first, last))
        own = _version_schema(h, value, base, numeric_decimals)
        versions.append(SchemaVersion(h, own, *where))
    return versions


Seen = tuple[int, tuple[int, int, int], tuple[int, int, int], bytes]
"""(hash, first and last (timestamp_ms, partition, offset), one value)."""


def _scan_rows(rows: Sequence[Sequence[Any]]) -> list[Seen] | None:
    """``find_versions`` of RAW_SCHEMA rows in Python; None when a value written with spaces is
    not UTF-8 (its pattern runs on text; the Spark scan handles those)."""
    seen: dict[int, Seen] = {}
    last: tuple[bytes, int] | None = None  # the previous compact schema and its hash
    for _topic, partition, offset, _key, value, timestamp_ms in rows:
        if value is None:
            continue
        # The previous schema followed by the delimiter: its first occurrence (a schema cut
        # at the first one holds none, and none can straddle: "," opens the delimiter only).
        if (
            last is not None
            and value.startswith(last[0])
            and value.startswith(_DELIMITER_BYTES, len(last[0]))
        ):
            h = last[1]
        else:
            try:
                text = _schema_bytes(value)
            except UnicodeDecodeError:
                return None
            if text is None:
                continue
            known = _known_hashes.get(text)
            h = xxhash64(text) if known is None else known
            if known is None:
                remember(_known_hashes, text, h)
            last = (text, h) if value.startswith(_HEAD_BYTES) else None
        at = (timestamp_ms, partition, offset)
        old = seen.get(h)
        seen[h] = (
            (h, at, at, value) if old is None else (h, min(old[1], at), max(old[2], at), old[3])
        )
    return list(seen.values())


def _version_schema(h: int, value: bytes, base: TopicSchema, numeric: bool) -> TopicSchema:
    """The decoding plan of one version (the one built before for this hash and ``base``)."""
    key = (h, id(base), numeric)
    known = _known_versions.get(key)
    if known is not None and known[0] is base:
        return known[1]
    # A payload's bytes that are not UTF-8 (this value was picked for its schema) are no reason
    # to fail here: the record itself is decoded, and judged, with the others.
    envelope = loads(value.decode(errors="replace"))["schema"]
    found = TopicSchema.from_connect(envelope, None, numeric_decimals=numeric)
    own = replace(found, key=base.key, connector=base.connector, value_prefix=value_prefix(value))
    remember(_known_versions, key, (base, own))
    return own
