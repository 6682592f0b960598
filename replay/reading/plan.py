"""A replay plan: per-partition offset ranges resolved from bounds, and the gaps found in them."""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cdc.errors import UserError
from cdc.streams.protocol import EventStream, TopicPartition
from cdc.streams.registry import printable_url
from replay.reading.bounds import Bound, BoundKind


class ReplayPlanError(UserError, ValueError):
    """The requested replay cannot be planned or would skip data; the message says where."""


@dataclass(frozen=True)
class PartitionRange:
    """Offsets ``start <= offset < stop`` of one partition, and the partition's stored extent."""

    tp: TopicPartition
    start: int
    stop: int
    log_start: int
    log_end: int

    @property
    def span(self) -> int:
        """Offsets in the range (an upper bound of the records: compaction and transaction
        markers leave offsets without records)."""
        return max(0, self.stop - self.start)


@dataclass(frozen=True)
class Gap:
    """Data the plan cannot see: ``retention`` (start below the log start) or
    ``compacted-middle`` (a compacted topic read from the middle into a table without its past)."""

    tp: TopicPartition
    kind: str
    detail: str


@dataclass(frozen=True)
class ReplayPlan:
    ranges: tuple[PartitionRange, ...]
    gaps: tuple[Gap, ...]
    stop: Bound

    @property
    def span(self) -> int:
        return sum(r.span for r in self.ranges)

    @property
    def stop_positions(self) -> dict[TopicPartition, int]:
        """The positions the target reflects once the plan has been applied."""
        return {r.tp: r.stop for r in self.ranges}

    @property
    def from_log_start(self) -> bool:
        """Whether every range starts at its partition's log start (a build from scratch)."""
        return all(r.start <= r.log_start for r in self.ranges)

    def check_gaps(self, allow_gaps: bool) -> None:
        """Refuse a plan with gaps unless the user allowed them."""
        if self.gaps and not allow_gaps:
            found = "; ".join(
                f"{g.tp.topic}[{g.tp.partition}] {g.kind}: {g.detail}" for g in self.gaps
            )
            raise ReplayPlanError(
                f"the replay would skip data ({found}); pass --allow-gaps to go on"
            )

    def render(self) -> str:
        """The plan as text, for ``--dry-run``."""
        lines = [
            f"{'topic':<40} {'part':>4} {'start':>12} {'stop':>12} {'span':>12} {'log start':>10}"
        ]
        for r in self.ranges:
            lines.append(
                f"{r.tp.topic:<40} {r.tp.partition:>4} {r.start:>12} {r.stop:>12} {r.span:>12} "
                f"{r.log_start:>10}"
            )
        lines.append(f"total offset span {self.span}; stop bound {self.stop.kind.value}")
        lines += [f"GAP {g.tp.topic}[{g.tp.partition}] {g.kind}: {g.detail}" for g in self.gaps]
        return "\n".join(lines)


def resolve_topics(stream: EventStream, names: Sequence[str]) -> list[str]:
    """Topic names, where an entry with regex characters is a pattern matched against the stream."""
    available = stream.topics()
    chosen: list[str] = []
    for name in names:
        if re.search(r"[*+?\[\]()|^$\\]", name):
            matched = [t for t in available if re.fullmatch(name, t)]
            if not matched:
                raise ReplayPlanError(
                    f"no topic matches the pattern {name!r} on {printable_url(stream.url)}"
                )
            chosen += [t for t in matched if t not in chosen]
        elif name not in available:
            raise ReplayPlanError(
                f"topic {name!r} does not exist on {printable_url(stream.url)}"
                f"{_near(name, available)}"
            )
        elif name not in chosen:
            chosen.append(name)
    return chosen


_PARTITIONS_ASKED_AT_MOST = 64


def stored_records(stream: EventStream, topics: Sequence[str], *, limit: int) -> int | None:
    """The records the partitions of ``topics`` store (their offsets: an upper bound of what a
    replay of them reads), or None once more than ``limit``, or over more partitions than are
    cheap to ask (a call each)."""
    partitions = [(topic, stream.partition_count(topic)) for topic in topics]
    if sum(count for _, count in partitions) > _PARTITIONS_ASKED_AT_MOST:
        return None
    total = 0
    for topic, count in partitions:
        for partition in range(count):
            bounds = stream.bounds(topic, partition)
            total += bounds.end - bounds.log_start
            if total > limit:
                return None
    return total


def _near(name: str, available: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, available, n=3)
    if close:
        return f" (did you mean {', '.join(close)}?)"
    return f" (it has {len(available)} topics)" if available else " (it has no topics)"


def plan_replay(
    stream: EventStream,
    topics: Sequence[str],
    start: Bound,
    stop: Bound,
    ledger: Mapping[TopicPartition, int] | None = None,
) -> ReplayPlan:
    """Resolve ``start``/``stop`` into offset ranges for every partition of ``topics``."""
    ranges, gaps = [], []
    for topic in resolve_topics(stream, topics):
        compacted = stream.is_compacted(topic)
        for partition in range(stream.partition_count(topic)):
            tp = TopicPartition(topic, partition)
            bounds = stream.bounds(topic, partition)
            first = _start_offset(stream, tp, start, ledger or {}, bounds.log_start)
            last = _stop_offset(stream, tp, stop, bounds.end)
            if first < bounds.log_start:
                gaps.append(
                    Gap(tp, "retention", f"start {first} is below the log start {bounds.log_start}")
                )
            elif compacted and first > bounds.log_start and start.kind is not BoundKind.LEDGER:
                gaps.append(
                    Gap(tp, "compacted-middle", f"starts at {first} of a compacted topic whose "
                        f"log starts at {bounds.log_start}: keys last written before are missing")
                )  # fmt: skip
            ranges.append(PartitionRange(tp, first, max(first, last), bounds.log_start, bounds.end))
    return ReplayPlan(tuple(ranges), tuple(gaps), stop)


def _start_offset(
    stream: EventStream,
    tp: TopicPartition,
    start: Bound,
    ledger: Mapping[TopicPartition, int],
    log_start: int,
) -> int:
    if start.kind is BoundKind.EARLIEST:
        return log_start
    if start.kind is BoundKind.LEDGER:
        return ledger.get(tp, log_start)
    if start.kind is BoundKind.OFFSETS:
        return start.offsets.get(tp, log_start)
    if start.kind is BoundKind.TIMESTAMP:
        assert start.timestamp_ms is not None
        return stream.offset_for_time(tp.topic, tp.partition, start.timestamp_ms)
    raise ReplayPlanError(f"{start.kind.value} is not a start bound")


def _stop_offset(stream: EventStream, tp: TopicPartition, stop: Bound, end: int) -> int:
    if stop.kind is BoundKind.OFFSETS:
        return min(stop.offsets.get(tp, end), end)
    if stop.kind is BoundKind.TIMESTAMP:
        assert stop.timestamp_ms is not None
        return stream.offset_for_time(tp.topic, tp.partition, stop.timestamp_ms + 1)
    return end  # latest, and source-position cuts (applied while decoding)
