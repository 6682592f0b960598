"""The quixstreams side of the benchmark, one measurement per process (in .venv-bench-quix).

Standalone (stdlib + quixstreams; it never imports ``cdc``, whose pins conflict):
``python quix_worker.py SPEC_JSON RESULT_JSON``. Modes, as ``ours_worker``:

- ``process``: an Application with its own consumer group, ``processing_guarantee=
  "exactly-once"``, its RocksDB state store with changelog topics (quixstreams' default), counts
  and sums the payments per customer (Decimal arithmetic, the same checks as
  ``cdc.examples.count_payment``) until it has processed the whole input, then stops.
  Throughput is ``events / (end of the final checkpoint commit - first event handled)``.
- ``restore``: the same consumer group again, its state directory deleted by the driver: the
  time of the RecoveryManager's ``do_recovery`` (reading the changelog to its end into a new
  store) and the changelog messages it applied.

Either way the state is read back from the store partitions afterwards for the driver to check.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

from quixstreams import Application
from quixstreams.checkpointing.checkpoint import Checkpoint
from quixstreams.state.recovery import RecoveryManager, RecoveryPartition
from quixstreams.state.rocksdb import RocksDBStorePartition

CENTS = Decimal("0.01")
STATE_KEY = "row"


def _cpu() -> float:
    times = os.times()
    return times.user + times.system


def count_payment(payment: Any, state: Any) -> None:
    """The per-customer count and exact sum, as ``cdc.examples.count_payment`` computes it."""
    if not isinstance(payment, dict) or not payment.get("customer_id"):
        raise ValueError("a payment needs a customer_id")
    amount = Decimal(str(payment.get("amount")))
    if not amount.is_finite() or amount < 0:
        raise ValueError(f"amount must be a non-negative amount, not {amount!r}")
    amount = amount.quantize(CENTS)
    row = state.get(STATE_KEY)
    payments = row["payments"] if row else 0
    total = Decimal(row["total_amount"]) if row else Decimal("0.00")
    state.set(
        STATE_KEY,
        {
            "customer_id": str(payment["customer_id"]),
            "payments": payments + 1,
            "total_amount": str(total + amount),
        },
    )


def dump_state(state_dir: Path) -> dict[str, list[object]]:
    """Every row of the store partitions under ``state_dir`` (read after the app stopped)."""
    rows: dict[str, list[object]] = {}
    for partition_dir in sorted(p for p in state_dir.rglob("*") if (p / "CURRENT").exists()):
        partition = RocksDBStorePartition(str(partition_dir))
        try:
            for _, value in partition.iter_items(b""):
                row = json.loads(value)
                if isinstance(row, dict) and "customer_id" in row:
                    rows[row["customer_id"]] = [row["payments"], row["total_amount"]]
        finally:
            partition.close()
    return rows


def main(spec_path: str, result_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    marks: dict[str, float] = {}
    counters = {"processed": 0, "restored": 0}
    app: Application | None = None

    commit = Checkpoint.commit

    def timed_commit(self: Checkpoint, *args: Any, **kwargs: Any) -> None:
        commit(self, *args, **kwargs)
        if counters["processed"] != marks.get("committed_count"):  # not an idle commit
            marks["last_commit"] = time.monotonic()
            marks["committed_count"] = counters["processed"]

    Checkpoint.commit = timed_commit

    recover = RecoveryPartition.recover_from_changelog_message

    def counted_recover(self: RecoveryPartition, *args: Any, **kwargs: Any) -> None:
        counters["restored"] += 1
        recover(self, *args, **kwargs)

    RecoveryPartition.recover_from_changelog_message = counted_recover

    do_recovery = RecoveryManager.do_recovery

    def timed_recovery(self: RecoveryManager) -> None:
        began, began_cpu = time.monotonic(), _cpu()
        do_recovery(self)
        marks["recovery_s"] = marks.get("recovery_s", 0.0) + time.monotonic() - began
        marks["recovery_cpu_s"] = marks.get("recovery_cpu_s", 0.0) + _cpu() - began_cpu
        marks["recovered"] = time.monotonic()
        if spec["mode"] == "restore" and app is not None:
            app.stop()

    RecoveryManager.do_recovery = timed_recovery

    def counted(payment: Any, state: Any) -> None:
        if "first" not in marks:
            marks["first"] = time.monotonic()
            marks["first_cpu"] = _cpu()
        count_payment(payment, state)

    def processed(topic: str, partition: int, offset: int) -> None:
        counters["processed"] += 1
        marks["last_event"] = time.monotonic()
        if counters["processed"] >= spec["events"] and app is not None:
            app.stop()

    idle_s = spec.get("idle_s")
    if idle_s:  # one of several instances: none sees every event, so stop when idle

        def stop_when_idle() -> None:
            while True:
                time.sleep(0.2)
                last = marks.get("last_event")
                if app is not None and last is not None and time.monotonic() - last > idle_s:
                    app.stop()
                    return

        import threading

        threading.Thread(target=stop_when_idle, daemon=True).start()

    state_dir = Path(spec["state_dir"])
    app = Application(
        broker_address=spec["bootstrap"],
        consumer_group=spec["group"],
        auto_offset_reset="earliest",
        processing_guarantee="exactly-once",
        state_dir=state_dir,
        commit_interval=spec["commit_interval_s"],
        commit_every=spec["commit_max_events"],
        on_message_processed=processed if spec["mode"] == "process" else None,
        loglevel="WARNING",
    )
    topic = app.topic(spec["topic"], value_deserializer="json", key_deserializer="bytes")
    sdf = app.dataframe(topic)
    sdf = sdf.update(counted, stateful=True)
    began = time.monotonic()
    app.run()
    ended = time.monotonic()
    result: dict[str, Any] = {"mode": spec["mode"], "run_s": ended - began}
    if spec["mode"] == "process":
        seconds = marks["last_commit"] - marks["first"] if "first" in marks else 0.0
        result.update(
            events=counters["processed"],
            seconds=seconds,
            first=marks.get("first"),
            last_commit=marks.get("last_commit"),
            measured_cpu_s=_cpu() - marks["first_cpu"] if "first" in marks else 0.0,
        )
    else:
        result.update(
            events=counters["restored"],
            seconds=marks.get("recovery_s", 0.0),
            measured_cpu_s=marks.get("recovery_cpu_s", 0.0),
            start_s=marks.get("recovered", began) - began,
        )
    result.update(
        events_per_s=result["events"] / result["seconds"] if result["seconds"] else 0.0,
        cpu_s=_cpu(),
        peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        state=dump_state(state_dir),
    )
    Path(result_path).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
