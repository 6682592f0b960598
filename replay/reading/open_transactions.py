"""Which source transactions to hold back at the tail, and where each partition must stop.

A transaction is *incomplete* while its END has not arrived, or while a topic of the job has
fewer of its events in the read range than the END counts for that topic
(``data_collections[].event_count``). Holding back is positional, as a ledger stores the next
offset to process per partition: a partition stops right before the first event of a held
transaction, and a transaction with events on both sides of such a stop is held as well
(repeated until none is split), so a later round starts exactly at what was held.

Only recent transactions are judged: one whose END (or, without an END, whose first event) is
older than ``settled_before_ms`` (the newest metadata record's time minus the settle window)
counts as complete. Its missing events were then removed by compaction (a later event of the
same key superseded them) or its END by the metadata topic's retention; a live connector sends
a transaction's events before its END and the END before the next transaction's metadata.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from cdc.streams.protocol import TopicPartition


@dataclass(frozen=True)
class TransactionPart:
    """The events of one transaction in one partition of the read range."""

    txn: str
    tp: TopicPartition
    events: int
    first: int
    last: int
    first_ms: int


@dataclass(frozen=True)
class Ending:
    """What the metadata topic says of one transaction: its END's event count per topic of the
    job (``None``: only its BEGIN was seen) and the time of its newest metadata record."""

    counts: Mapping[str, int] | None
    ts_ms: int


@dataclass(frozen=True)
class Holding:
    """The stops lowered before held transactions, and the transactions held."""

    stops: Mapping[TopicPartition, int]
    held: frozenset[str]
    incomplete: frozenset[str]


def incomplete_transactions(
    parts: Iterable[TransactionPart], endings: Mapping[str, Ending], settled_before_ms: int
) -> set[str]:
    """The transactions of ``parts`` whose END or some of whose events have not arrived."""
    seen: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    first_ms: dict[str, int] = {}
    for part in parts:
        seen[part.txn][part.tp.topic] += part.events
        first_ms[part.txn] = min(first_ms.get(part.txn, part.first_ms), part.first_ms)
    out = set()
    for txn, per_topic in seen.items():
        ending = endings.get(txn)
        if ending is None or ending.counts is None:
            if first_ms[txn] >= settled_before_ms:
                out.add(txn)
        elif ending.ts_ms >= settled_before_ms and any(
            per_topic.get(topic, 0) < count for topic, count in ending.counts.items()
        ):
            out.add(txn)
    return out


def hold_back(
    parts: Iterable[TransactionPart],
    endings: Mapping[str, Ending],
    stops: Mapping[TopicPartition, int],
    settled_before_ms: int,
) -> Holding:
    """Lower ``stops`` so that no transaction is applied in part (see the module doc)."""
    parts = list(parts)
    incomplete = incomplete_transactions(parts, endings, settled_before_ms)
    by_txn: dict[str, list[TransactionPart]] = defaultdict(list)
    for part in parts:
        by_txn[part.txn].append(part)
    held, cut = set(incomplete), dict(stops)
    changed = bool(held)
    while changed:
        for txn in held:
            for part in by_txn[txn]:
                cut[part.tp] = min(cut.get(part.tp, part.first), part.first)
        split = {
            txn
            for txn, txn_parts in by_txn.items()
            if txn not in held
            and any(p.last >= cut.get(p.tp, p.last + 1) for p in txn_parts)
            and any(p.first < cut.get(p.tp, p.first + 1) for p in txn_parts)
        }
        held |= split
        changed = bool(split)
    lowered = {tp: stop for tp, stop in cut.items() if tp in stops and stop < stops[tp]}
    return Holding(lowered, frozenset(held), frozenset(incomplete))
