"""The source mirror of Delta projections (RocksDB on local disk): signing, the undo record a
crash before the master's commit is rewound with, and the lock followers take turns on."""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from replay.sinks.delta_mirror import DeltaMirror, MirrorOutOfStepError

ROWS = dict[tuple[Any, ...], tuple[Any, ...]]


def _change(op: str, pos: str, key: int, title: str = "x", at: Any = None) -> Any:
    return (op, pos, (key, title, at))


def _batch(mirror: DeltaMirror, seq: int, changes: list[Any], truncated: bool = False) -> Any:
    signed = mirror.sign(changes, truncated)
    mirror.apply(signed, seq)
    return sorted(signed.rows, key=repr)


def _rows(mirror: DeltaMirror) -> ROWS:
    """The live rows of the mirror, as a batch deleting everything would retract them."""
    keys = [json.loads(key) for key, _ in mirror.store.scan("rows")]
    signed = mirror.sign([("d", "~", tuple(key)) for key in keys], False)
    return {row[:1]: row[:-1] for row in signed.rows}


def test_signs_against_the_rows_before_the_batch(tmp_path: Path) -> None:
    at = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    with DeltaMirror(tmp_path / "m", 1) as mirror:
        assert _batch(mirror, 0, [_change("u", "01", 1, "a", at), _change("u", "01", 2, "b")]) == [
            (1, "a", at, 1), (2, "b", None, 1),
        ]  # fmt: skip
        signed = _batch(mirror, 1, [_change("u", "02", 1, "c"), _change("d", "02", 2)])
        assert signed == [(1, "a", at, -1), (1, "c", None, 1), (2, "b", None, -1)]
        # a replayed older change is a duplicate; a deleted key stays deleted (its tombstone)
        assert _batch(mirror, 2, [_change("u", "01", 1, "old"), _change("u", "01", 2, "b")]) == []
        assert _batch(mirror, 3, [_change("u", "03", 2, "back")]) == [(2, "back", None, 1)]
        assert mirror.seq() == 3


def test_values_keep_their_types(tmp_path: Path) -> None:
    values = (Decimal("12.50"), date(2026, 2, 28), b"\x00\xff", [1, 2], {"a": None})
    with DeltaMirror(tmp_path / "m", 1) as mirror:
        _batch(mirror, 0, [("u", "01", (7, *values))])
    with DeltaMirror(tmp_path / "m", 1) as mirror:
        [row] = mirror.sign([("d", "02", (7,))], False).rows
    assert row == (7, *values, -1) and isinstance(row[1], Decimal) and row[1].as_tuple()[2] == -2


def test_rewind_undoes_the_batch_the_master_did_not_commit(tmp_path: Path) -> None:
    with DeltaMirror(tmp_path / "m", 1) as mirror:
        _batch(mirror, 4, [_change("u", "01", 1, "a"), _change("u", "01", 2, "b")])
        before = _rows(mirror)
        _batch(
            mirror, 5, [_change("u", "02", 1, "c"), _change("d", "02", 2), _change("u", "02", 3)]
        )
        mirror.rewind(5)  # the master committed it: nothing to undo
        assert mirror.seq() == 5 and _rows(mirror) == {(1,): (1, "c", None), (3,): (3, "x", None)}
        mirror.rewind(4)
        assert mirror.seq() == 4 and _rows(mirror) == before
        with pytest.raises(MirrorOutOfStepError, match="holds batch 4, its projection batch 3"):
            mirror.rewind(3)  # one batch back at most: the undo record is spent


def test_rewind_undoes_a_truncate(tmp_path: Path) -> None:
    with DeltaMirror(tmp_path / "m", 1) as mirror:
        _batch(mirror, 0, [_change("u", "01", k) for k in range(5)])
        before = _rows(mirror)
        assert _batch(mirror, 1, [_change("u", "03", 9)], truncated=True) == [(9, "x", None, 1)]
        assert _rows(mirror) == {(9,): (9, "x", None)}
        mirror.rewind(0)
        assert _rows(mirror) == before


def test_a_mirror_behind_its_projection_is_refused(tmp_path: Path) -> None:
    behind = pytest.raises(MirrorOutOfStepError, match=r"holds batch None, its projection batch 2")
    with DeltaMirror(tmp_path / "m", 1) as mirror, behind:
        mirror.rewind(2)  # e.g. the mirror's directory was deleted


def test_a_second_opener_waits_for_the_first_to_close(tmp_path: Path) -> None:
    first = DeltaMirror(tmp_path / "m", 1)
    opened: list[float] = []

    def second() -> None:
        with DeltaMirror(tmp_path / "m", 1, wait_s=30):
            opened.append(time.monotonic())

    thread = threading.Thread(target=second)
    thread.start()
    time.sleep(0.6)
    closed = time.monotonic()
    first.store.close()
    thread.join(10)
    assert opened and opened[0] >= closed
