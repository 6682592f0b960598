"""Restore keeps the newest changelog record per key: puts, deletes, clears and tombstones,
over several windows, rebuild the state the processor had; the fast path agrees with decode."""

from __future__ import annotations

import gc
import json
import random
from pathlib import Path

import pytest

from cdc.processor import EventProcessor, InputEvent, ProcessorConfig
from cdc.processor import restore as restore_module
from cdc.state import StateTable, StateTransaction
from cdc.state.restore import changelog_layer
from cdc.streams.local import LocalLog

ITEMS = StateTable("items", {"k": str, "v": int, "note": str}, key="k")


def handle(event: InputEvent, tx: StateTransaction) -> None:
    op, key = event.value["op"], event.value.get("k")
    table = tx[ITEMS]
    if op == "put":
        table.put({"k": key, "v": event.value["v"], "note": event.value.get("note")})
    elif op == "del":
        table.delete(key)
    else:
        table.clear()


def operations(count: int, seed: int) -> list[dict[str, object]]:
    rng = random.Random(seed)
    ops: list[dict[str, object]] = []
    for i in range(count):
        roll = rng.random()
        key = f"k{rng.randrange(12)}"
        if roll < 0.02:
            ops.append({"op": "clear"})
        elif roll < 0.3:
            ops.append({"op": "del", "k": key})
        else:
            ops.append({"op": "put", "k": key, "v": i, "note": rng.choice([None, "é", "x\u0000y"])})
    return ops


def processor(log: LocalLog, store: str, schemas: bool) -> EventProcessor:
    config = ProcessorConfig(
        "items-proc", ("ops",), store_url=store, commit_max_events=7, schemas_enable=schemas
    )
    return EventProcessor(config, log, [ITEMS], handle)


def processed_log(
    tmp_path: Path, ops: list[dict[str, object]], partitions: int, schemas: bool
) -> tuple[LocalLog, dict[str, tuple[object, object]]]:
    """A log whose ``ops`` topic holds ``ops``, processed once: the log and the
    state the processor had."""
    log = LocalLog.from_url(f"local://{tmp_path}/log")
    log.ensure_topic("ops", partitions)
    writer = log.writer("feeder")
    writer.begin()
    for i, op in enumerate(ops):
        writer.send("ops", f"{i % 5}".encode(), json.dumps(op).encode())
    writer.commit()
    writer.close()
    first = processor(log, f"rocksdb://{tmp_path}/store", schemas)
    first.start()
    assert first.run(idle_timeout_s=0.5).events == len(ops)
    expected = state(first)
    first.close()
    return log, expected


def state(p: EventProcessor) -> dict[str, tuple[object, object]]:
    assert p.tables is not None
    return {r["k"]: (r["v"], r["note"]) for r in p.tables.view(ITEMS).scan()}


@pytest.mark.parametrize("schemas", [True, False], ids=["schemas", "schemaless"])
@pytest.mark.parametrize("window_keys", [3, 200_000], ids=["small-windows", "one-window"])
def test_rebuild_from_newest_records_equals_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, schemas: bool, window_keys: int
) -> None:
    monkeypatch.setattr(restore_module, "WINDOW_KEYS", window_keys)
    log, expected = processed_log(tmp_path, operations(600, seed=3), 2, schemas)

    rebuilt = processor(log, f"rocksdb://{tmp_path}/new-store", schemas)
    report = rebuilt.start()
    assert report.events > 600  # every changelog record read (deletes add tombstones)
    assert state(rebuilt) == expected
    rebuilt.close()

    # The fast path of each record gives the write the full decode gives.
    connector = rebuilt.connector
    topic = connector.topics[ITEMS.name]
    for partition in range(log.partition_count(topic)):
        for record in log.read(topic, partition, 0):
            fast = connector.restore_write(record)
            change = connector.decode(record)
            if change is None:
                if record.value is None and fast is not None:
                    assert fast[2] is None  # a tombstone deletes its key
                continue
            layer = changelog_layer({ITEMS.name: ITEMS}, [change])
            assert fast is not None
            assert layer.writes[ITEMS.name] == {fast[1]: fast[2]}
    log.close()


@pytest.mark.parametrize("enabled_before", [True, False], ids=["gc-on", "gc-off"])
def test_restore_pauses_the_cycle_collector_and_puts_it_back(
    tmp_path: Path, enabled_before: bool
) -> None:
    ops: list[dict[str, object]] = [{"op": "put", "k": f"k{i}", "v": i} for i in range(20)]
    log, expected = processed_log(tmp_path, ops, 1, schemas=False)

    during: list[bool] = []
    rebuilt = processor(log, f"rocksdb://{tmp_path}/new-store", schemas=False)
    (gc.enable if enabled_before else gc.disable)()
    try:
        report = rebuilt.start(progress=lambda done, total: during.append(gc.isenabled()))
        after = gc.isenabled()
    finally:
        gc.enable()
    assert report.events == 20
    assert state(rebuilt) == expected
    assert during and not any(during)
    assert after is enabled_before
    rebuilt.close()
    log.close()
