"""``--follow``: every round after the first keeps the first round's tables and options; rounds
go on at once while they find events, wait when caught up, and are retried with a back-off when
the stream or the sink is unavailable (the loop, with rounds of our own; the real broker's outage
is in test_follow_outage)."""

from __future__ import annotations

import pytest

from cdc.errors import ChangeEventError, UnavailableError
from cdc.events.columns import Column, TableSpec
from cdc.streams.kafka_errors import KafkaRefusedError
from replay.cli.follow import RETRY_MAX_S, follow_rounds
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


class Rounds:
    """Rounds that return or raise what ``outcomes`` lists, in order; the last one interrupts."""

    def __init__(self, *outcomes: bool | Exception) -> None:
        self.outcomes, self.sleeps, self.warnings = list(outcomes), list[float](), list[str]()

    def __call__(self) -> bool:
        if not self.outcomes:
            raise KeyboardInterrupt
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def follow(self, *, follow: bool = True) -> None:
        follow_rounds(self, follow=follow, poll_s=0.25, warn=self.warnings.append,
                      sleep=self.sleeps.append)  # fmt: skip


def test_rounds_go_on_at_once_while_they_find_events_and_wait_when_caught_up() -> None:
    rounds = Rounds(True, True, False, True, False)
    with pytest.raises(KeyboardInterrupt):
        rounds.follow()
    assert rounds.sleeps == [0.25, 0.25]
    assert not rounds.warnings


def test_an_unavailable_stream_is_retried_with_a_doubling_back_off_reset_by_a_round() -> None:
    down = UnavailableError("offsets of t partition 0: Local: All broker connections are down")
    rounds = Rounds(True, *[down] * 9, True, down, False)
    with pytest.raises(KeyboardInterrupt):
        rounds.follow()
    backoffs = rounds.sleeps[:9]
    assert backoffs == [0.5, 1, 2, 4, 8, 16, RETRY_MAX_S, RETRY_MAX_S, RETRY_MAX_S]
    assert rounds.sleeps[9:] == [0.5, 0.25]  # reset after the round that went through
    assert len(rounds.warnings) == 10
    assert rounds.warnings[0] == (
        "round failed: offsets of t partition 0: Local: All broker connections are down; "
        "retrying in 0.5s"
    )


def test_other_errors_and_one_off_runs_stop_at_once() -> None:
    bad = ChangeEventError("unknown op", topic="t", partition=0, offset=7)
    rounds = Rounds(True, bad)
    with pytest.raises(ChangeEventError):
        rounds.follow()
    assert rounds.sleeps == [] and rounds.warnings == []
    once = Rounds(UnavailableError("broker down"))
    with pytest.raises(UnavailableError):
        once.follow(follow=False)
    one = Rounds(False, True)
    one.follow(follow=False)
    assert one.outcomes == [True] and one.sleeps == []  # one round, no wait


def test_a_refused_login_stops_at_once_unless_a_round_has_worked() -> None:
    """A login that never worked is a wrong URL: one line, no retry. Once a round has gone
    through, a refusal is more likely the credentials' service (LDAP, an OAuth provider) down."""
    refused = KafkaRefusedError("offsets of t partition 0: logging in to the brokers failed")
    first = Rounds(refused)
    with pytest.raises(KafkaRefusedError):
        first.follow()
    assert first.sleeps == [] and first.warnings == []
    later = Rounds(True, refused, refused, False)
    with pytest.raises(KeyboardInterrupt):
        later.follow()
    assert later.sleeps == [0.5, 1, 0.25] and len(later.warnings) == 2
    with pytest.raises(KafkaRefusedError):
        Rounds(refused).follow(follow=False)
