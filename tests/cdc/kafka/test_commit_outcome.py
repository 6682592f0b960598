"""What a failed ``commit_transaction`` means for the caller, decided by the writer: a retriable
failure (a timed-out commit goes on in the background) is asked again; one still unsettled at
the deadline is an unknown outcome, never a lost transaction (whose records a processor would
process again: duplicates if the commit had taken effect); an abortable one is aborted and lost.
The producer here is a stand-in that answers ``commit_transaction`` with given librdkafka errors
(the codes and flags are librdkafka's own); the real commit paths run in the broker tests."""

from __future__ import annotations

from typing import Any

import pytest

from cdc.errors import UnavailableError
from cdc.streams import kafka_client as kc
from cdc.streams.kafka_errors import KafkaCommitUnknownError, KafkaTransactionError
from cdc.streams.kafka_writer import KafkaTransactionalWriter
from cdc.streams.protocol import TransactionLostError

TIMED_OUT = kc.KafkaError(kc.KafkaError._TIMED_OUT, "timed out", retriable=True)
DOWN = kc.KafkaError(kc.KafkaError._ALL_BROKERS_DOWN, "all brokers down")
ABORTABLE = kc.KafkaError(kc.KafkaError._STATE, "requires abort", txn_requires_abort=True)
FENCED = kc.KafkaError(kc.KafkaError._FENCED, "fenced", fatal=True)


class CommitAnswers:
    """``commit_transaction`` answering the queued errors first, then success."""

    def __init__(self, *errors: kc.KafkaError) -> None:
        self.errors, self.commits, self.aborts = list(errors), 0, 0

    def commit_transaction(self, timeout: float) -> None:
        self.commits += 1
        if self.errors:
            raise kc.KafkaException(self.errors.pop(0))

    def abort_transaction(self, timeout: float) -> None:
        self.aborts += 1

    def init_transactions(self, timeout: float) -> None:
        pass


def _writer(producer: CommitAnswers, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A writer around ``producer``, made without a broker: ``kafka_client`` hands out the
    stand-ins (``producer``, then fresh ones for a writer that takes over after a failed abort);
    with ``visible_on_commit`` off it opens no consumer."""
    producers = iter([producer])
    monkeypatch.setattr(kc, "make_producer", lambda *_: next(producers, CommitAnswers()))
    return KafkaTransactionalWriter("127.0.0.1:9", "t-1", {}, visible_on_commit=False)


def test_a_timed_out_commit_is_asked_again_until_it_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    producer = CommitAnswers(TIMED_OUT, TIMED_OUT)
    _writer(producer, monkeypatch)._commit_transaction(timeout_s=30)
    assert (producer.commits, producer.aborts) == (3, 0)


@pytest.mark.parametrize(("errors", "deadline_s"), [([TIMED_OUT] * 3, 0), ([DOWN], 30)])
def test_a_commit_the_cluster_left_unanswered_is_unknown_not_lost(
    monkeypatch: pytest.MonkeyPatch, errors: list[kc.KafkaError], deadline_s: float
) -> None:
    """Retriable but still failing at the deadline, or an outage librdkafka will not retry."""
    producer = CommitAnswers(*errors)
    with pytest.raises(KafkaCommitUnknownError, match="may have taken effect") as raised:
        _writer(producer, monkeypatch)._commit_transaction(timeout_s=deadline_s)
    assert not isinstance(raised.value, TransactionLostError)
    assert isinstance(raised.value, UnavailableError) and producer.aborts == 0
    assert producer.commits == 1


@pytest.mark.parametrize(("error", "aborts"), [(ABORTABLE, 1), (FENCED, 0)])
def test_an_abortable_or_fenced_commit_is_lost(
    monkeypatch: pytest.MonkeyPatch, error: kc.KafkaError, aborts: int
) -> None:
    producer = CommitAnswers(error)
    with pytest.raises(KafkaTransactionError) as raised:
        _writer(producer, monkeypatch)._commit_transaction(timeout_s=30)
    assert isinstance(raised.value, TransactionLostError)
    assert (producer.commits, producer.aborts) == (1, aborts)
