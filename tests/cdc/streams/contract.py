"""Behaviour every ``EventStream`` backend must have, as checks taking a stream opener.

A backend's test module runs every function of ``CONTRACT_CHECKS`` with an ``open_stream``
that returns a *new handle on the same store* on each call (for the local log: the same
directory; for Kafka: the same cluster). Checks use fresh topic names, so a shared store is
fine. They assume only what the protocol promises: offsets increase but may have gaps (Kafka's
transaction markers), ``bounds().end`` is the last stable offset, ``read`` ends at the
committed end even if ``stop`` lies beyond it, and errors are some Exception naming what is
wrong (the protocol defines no error types but ``read_compacted``'s budget).
"""

from __future__ import annotations

from collections.abc import Callable

from tests.cdc.streams import contract_compacted as compacted
from tests.cdc.streams import contract_reading as reading
from tests.cdc.streams import contract_transactions as transactions
from tests.cdc.streams.contract_support import StreamOpener

CONTRACT_CHECKS: list[Callable[[StreamOpener], None]] = [
    transactions.check_topics_are_created_idempotently,
    transactions.check_records_round_trip,
    transactions.check_uncommitted_records_are_invisible,
    transactions.check_aborted_transactions_are_never_visible,
    transactions.check_commit_returns_the_next_positions,
    transactions.check_consumer_positions_commit_with_the_transaction,
    transactions.check_new_writer_fences_the_old_one,
    transactions.check_compacted_topics_need_keys,
    transactions.check_transactions_stay_whole_under_concurrent_reads,
    reading.check_read_respects_start_and_stop,
    reading.check_keys_are_partitioned_like_kafka,
    reading.check_reader_polls_many_partitions_and_topics,
    reading.check_idle_reader_waits_for_commits_of_another_handle,
    reading.check_offset_for_time,
    reading.check_data_survives_reopening,
    compacted.check_compacted_read_keeps_the_newest_per_key,
    compacted.check_compacted_read_stops_over_its_budget,
]
"""Every contract check, for ``pytest.mark.parametrize``."""

__all__ = ["CONTRACT_CHECKS", "StreamOpener"]
