"""``replay --follow``: every round after the first keeps the first round's tables and options."""

from __future__ import annotations

from cdc.events.columns import Column, TableSpec
from replay.cli.replay import next_round
from replay.reading.bounds import Bound, BoundKind
from replay.tables.engine import ReplayJob


def test_a_later_round_keeps_into_gaps_declarations_and_policy() -> None:
    declared = {
        "s.t": TableSpec(
            server="s", table="t", columns=(Column(name="id", type="int64"),), key=("id",)
        )
    }
    first = ReplayJob(
        ("s.t",), start=Bound(BoundKind.EARLIEST), into={"s.t": "t_copy"}, declared=declared,
        on_error="dead-letter", allow_gaps=True, batch_offsets=123,
    )  # fmt: skip
    later = next_round(first)
    assert later.start.kind is BoundKind.LEDGER
    assert later.into == {"s.t": "t_copy"}  # not the topic's own table from round 2 on
    assert (later.declared, later.on_error, later.allow_gaps, later.batch_offsets) == (
        declared, "dead-letter", True, 123,
    )  # fmt: skip
    assert later.stop == first.stop and later.topics == first.topics
