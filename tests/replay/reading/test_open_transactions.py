"""Which transactions are held back at the tail, and where each partition stops."""

from __future__ import annotations

from cdc.streams.protocol import TopicPartition
from replay.reading.open_transactions import Ending, TransactionPart, hold_back

A0, A1, B0 = TopicPartition("s.a", 0), TopicPartition("s.a", 1), TopicPartition("s.b", 0)
NOW = 1_000_000
STOPS = {A0: 100, A1: 100, B0: 100}


def part(txn: str, tp: TopicPartition, first: int, last: int, events: int = 0) -> TransactionPart:
    return TransactionPart(txn, tp, events or last - first + 1, first, last, NOW)


def ended(ts_ms: int = NOW, **counts: int) -> Ending:
    return Ending({f"s.{topic}": n for topic, n in counts.items()}, ts_ms)


def test_whole_transactions_are_applied() -> None:
    parts = [part("1", A0, 10, 11), part("1", B0, 5, 5)]
    holding = hold_back(parts, {"1": ended(a=2, b=1)}, STOPS, NOW - 60_000)
    assert holding.stops == {} and holding.held == frozenset()


def test_a_transaction_without_its_end_stops_every_partition_it_touched() -> None:
    parts = [part("1", A0, 10, 11), part("2", A0, 12, 13), part("2", B0, 5, 6)]
    holding = hold_back(parts, {"1": ended(a=2), "2": Ending(None, NOW)}, STOPS, NOW - 60_000)
    assert holding.held == {"2"}
    assert holding.stops == {A0: 12, B0: 5}


def test_a_topic_whose_part_has_not_arrived_holds_the_other_topics_part() -> None:
    parts = [part("7", A0, 40, 42)]  # the END counts one event of s.b too: not there yet
    holding = hold_back(parts, {"7": ended(a=3, b=1)}, STOPS, NOW - 60_000)
    assert holding.incomplete == {"7"} and holding.stops == {A0: 40}


def test_a_short_count_within_a_topic_holds_it() -> None:
    parts = [part("7", A0, 40, 41), part("7", A1, 50, 50)]  # 3 of 4 events of s.a
    holding = hold_back(parts, {"7": ended(a=4)}, STOPS, NOW - 60_000)
    assert holding.stops == {A0: 40, A1: 50}


def test_a_complete_transaction_split_by_a_stop_is_held_too() -> None:
    # 8 is incomplete and sits in A0 before 9's A0 events; 9 is whole, but its B0 event would
    # be applied without its A0 events: it is held as well, and B0 stops before it.
    parts = [part("8", A0, 20, 21), part("9", A0, 22, 22), part("9", B0, 30, 30)]
    endings = {"8": ended(a=3), "9": ended(a=1, b=1)}
    holding = hold_back(parts, endings, STOPS, NOW - 60_000)
    assert holding.incomplete == {"8"} and holding.held == {"8", "9"}
    assert holding.stops == {A0: 20, B0: 30}


def test_settled_transactions_count_as_complete() -> None:
    # compaction removed an event of an old transaction; the metadata topic lost another's END
    old = NOW - 120_000
    parts = [
        TransactionPart("1", A0, 1, 10, 20, old),
        TransactionPart("2", A0, 11, 12, 30, old),
    ]
    holding = hold_back(parts, {"1": ended(old, a=2)}, STOPS, NOW - 60_000)
    assert holding.held == frozenset() and holding.stops == {}


def test_stops_never_rise_and_other_partitions_are_untouched() -> None:
    parts = [part("3", A0, 95, 99)]
    holding = hold_back(parts, {"3": Ending(None, NOW)}, {A0: 97, A1: 100}, NOW - 60_000)
    assert holding.stops == {A0: 95}
