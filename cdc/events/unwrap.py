"""ExtractNewRecordState ("unwrap" SMT) flat rows, read as change events.

The SMT replaces the envelope by the row itself plus the metadata its ``add.fields`` names, each
prefixed ``__`` (``__op``, ``__table``, ``__lsn``, ``__source_ts_ms``, and ``__deleted`` with
``delete.handling.mode=rewrite``). A value object with ``__op`` or ``__deleted`` and no
``source`` is read as a ``ChangeEvent`` with ``unwrapped=True``:

* ``op`` is ``__op``; without it, ``"d"`` when ``__deleted`` is true, else ``"u"`` (an upsert
  whose kind the SMT dropped).
* The row (all fields not starting with ``__``) is ``after``, or ``before`` for a delete.
* ``__ts_ms``/``__ts_us``/``__ts_ns`` are the envelope's timestamps; ``__source_<x>`` and every
  other ``__<x>`` become ``source.<x>`` (``__lsn`` -> ``source.lsn``).
* The connector is ``__source_connector``/``__connector`` when added, else inferred from the
  fields: ``lsn`` -> postgresql, ``commit_lsn``/``change_lsn`` -> sqlserver, ``file``/``pos``
  -> mysql, otherwise ``"unknown"``.

For ``position()`` to work, add the position fields to ``add.fields``: PostgreSQL
``source.lsn,source.sequence``; MySQL ``source.file,source.pos,source.row``; SQL Server
``source.commit_lsn,source.change_lsn,source.event_serial_no``. Rows without ``__op`` or
``__deleted`` cannot be told apart from other JSON and are not read as changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

METADATA_PREFIX = "__"
_ENVELOPE_FIELDS = frozenset({"op", "ts_ms", "ts_us", "ts_ns"})
_SOURCE_PREFIX = "source_"


def is_flat_row(payload: Mapping[str, Any]) -> bool:
    """True when ``payload`` looks like ExtractNewRecordState output rather than an envelope."""
    return ("__op" in payload or "__deleted" in payload) and "source" not in payload


def split_flat_row(payload: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(row, metadata)``: the columns, and the ``__`` fields without their prefix."""
    row: dict[str, Any] = {}
    metadata: dict[str, Any] = {}
    for name, value in payload.items():
        if name.startswith(METADATA_PREFIX):
            metadata[name[len(METADATA_PREFIX) :]] = value
        else:
            row[name] = value
    return row, metadata


def _infer_connector(source: Mapping[str, Any]) -> str:
    if "lsn" in source:
        return "postgresql"
    if "commit_lsn" in source or "change_lsn" in source:
        return "sqlserver"
    if "file" in source or "pos" in source:
        return "mysql"
    return "unknown"


def _is_true(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.lower() == "true")


def envelope_from_flat_row(row: dict[str, Any], metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The envelope (as ``ChangeEvent`` validates it) that a flat row and its metadata stand for."""
    envelope: dict[str, Any] = {"unwrapped": True}
    source: dict[str, Any] = {}
    for name, value in metadata.items():
        if name in _ENVELOPE_FIELDS:
            envelope[name] = value
        elif name.startswith(_SOURCE_PREFIX):
            source[name[len(_SOURCE_PREFIX) :]] = value
        elif name != "deleted":
            source.setdefault(name, value)
    source.setdefault("connector", _infer_connector(source))
    deleted = _is_true(metadata.get("deleted"))
    op = envelope.setdefault("op", "d" if deleted else "u")
    if deleted or op == "d":
        envelope["before"] = row
    else:
        envelope["after"] = row
    envelope["source"] = source
    return envelope
