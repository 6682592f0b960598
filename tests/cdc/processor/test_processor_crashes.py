"""Exactly-once under kill -9: the processor is killed at random points and restarted; the final
state tables and the committed changelog equal a reference computed from the input alone."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import pytest

from cdc.connector.changelog import ChangelogConnector
from cdc.events import TransactionEvent, parse_value
from cdc.examples import PAYMENTS_PER_CUSTOMER
from cdc.state import CorruptStateStoreError, StateTables, open_state_store
from cdc.streams.protocol import EventStream
from cdc.streams.registry import open_stream
from tests.cdc.processor.test_processor import changelog_state, expected_totals, payments

REPO = Path(__file__).resolve().parents[3]
TRIALS = 12
CHUNK = 400


def _spawn(args: list[str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.cdc.processor.crash_worker", *args],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip


def _produce(stream: EventStream, topic: str, values: list[dict[str, str]], trial: int) -> None:
    writer = stream.writer(f"feeder-{topic}")
    writer.begin()
    for i, value in enumerate(values):
        writer.send(topic, f"{trial}-{i}".encode(), json.dumps(value).encode())
    writer.commit()
    writer.close()


def store_state(store_dir: Path) -> dict[str, tuple[int, Decimal]]:
    store = open_state_store(f"rocksdb://{store_dir}")
    try:
        view = StateTables(store, [PAYMENTS_PER_CUSTOMER]).view(PAYMENTS_PER_CUSTOMER)
        return {r["customer_id"]: (r["payments"], r["total_amount"]) for r in view.scan()}
    finally:
        store.close()


def _check_store_not_ahead(stream: EventStream, store_dir: Path) -> None:
    if not store_dir.exists():
        return
    try:
        store = open_state_store(f"rocksdb://{store_dir}")
    except CorruptStateStoreError:
        return  # killed while creating the store: the processor rebuilds it on start

    try:
        for tp, position in store.checkpoint().items():
            assert position <= stream.bounds(tp.topic, tp.partition).end, (tp, position)
    finally:
        store.close()


def run_crash_trials(
    stream_url: str, tmp_path: Path, name: Callable[[str], str], *, lose_store: bool
) -> None:
    rng = random.Random(20261122 + int(lose_store))
    stream = open_stream(stream_url)
    topic, processor_id = name("payments-in"), name("crashy")
    stream.ensure_topic(topic, 2)
    store_dir = tmp_path / "store"
    store_url = f"rocksdb://{store_dir}"
    produced: list[dict[str, str]] = []
    kills = 0
    for trial in range(TRIALS):
        chunk = payments(CHUNK, seed=trial)
        _produce(stream, topic, chunk, trial)
        produced += chunk
        worker = _spawn([stream_url, store_url, processor_id, topic, "30"])
        time.sleep(rng.uniform(0.3, 3.0))
        if worker.poll() is None:
            worker.kill()  # SIGKILL: no cleanup of any kind
            kills += 1
        worker.wait()
        _check_store_not_ahead(stream, store_dir)
        if lose_store and trial % 2 == 0:
            shutil.rmtree(store_dir, ignore_errors=True)
    final = _spawn([stream_url, store_url, processor_id, topic, "1.5"])
    _, err = final.communicate(timeout=300)
    assert final.returncode == 0, err.decode()[-2000:]
    assert kills >= TRIALS // 2, f"only {kills} of {TRIALS} workers were killed mid-run"

    reference = expected_totals(produced)
    assert store_state(store_dir) == reference
    connector = ChangelogConnector(processor_id, [PAYMENTS_PER_CUSTOMER], partitions=2)
    assert changelog_state(stream, connector) == reference
    # No duplicated effect: exactly one committed change event per input event.
    changelog = connector.topics[PAYMENTS_PER_CUSTOMER.name]
    values = [r.value for p in (0, 1) for r in stream.read(changelog, p, 0) if r.value is not None]
    assert len(values) == len(produced)
    ends = [
        e for r in stream.read(connector.transaction_topic, 0, 0)
        if isinstance(e := parse_value(r.value), TransactionEvent) and e.status == "END"
    ]  # fmt: skip
    assert sum(e.event_count or 0 for e in ends) == len(produced)
    stream.close()


@pytest.mark.integration
@pytest.mark.parametrize("lose_store", [False, True], ids=["store-kept", "store-deleted"])
def test_kill_9_on_kafka(
    kafka_bootstrap: str, tmp_path: Path, unique_name: Callable[[str], str], lose_store: bool
) -> None:
    run_crash_trials(f"kafka://{kafka_bootstrap}", tmp_path, unique_name, lose_store=lose_store)


@pytest.mark.parametrize("lose_store", [False, True], ids=["store-kept", "store-deleted"])
def test_kill_9_on_the_local_log(
    tmp_path: Path, unique_name: Callable[[str], str], lose_store: bool
) -> None:
    run_crash_trials(f"local://{tmp_path}/log", tmp_path, unique_name, lose_store=lose_store)
