"""One member of our partitioned processor in the scale-out benchmark (in the project venv).

``python -m bench.processor.member_worker SPEC_JSON RESULT_JSON``: joins the processor's group,
counts payments with ``count_payment`` over the tasks the group gives it, and prints one JSON
line per change of its tasks, one per second of progress, and one per lost transaction, per
commit over 0.3 s and for the first commit after new tasks arrived (wall-clock ``time`` for
the failover measurement). Stops after ``idle_s`` without input (``stop`` = ``idle``) or at SIGTERM
(``stop`` = ``signal``), then writes the result: first event and last commit (monotonic, which
the driver compares across members), events, CPU, peak RSS and the rows of its active tasks.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cdc.examples import PAYMENTS_PER_CUSTOMER, count_payment
from cdc.processor import InputEvent, ProcessorConfig
from cdc.processor.group import GroupProcessor
from cdc.processor.tasks import RebalanceEvent
from cdc.state import StateTransaction
from cdc.streams.protocol import TransactionLostError
from cdc.streams.registry import open_stream


def _cpu() -> float:
    times = os.times()
    return times.user + times.system


def _line(**fields: Any) -> None:
    print(json.dumps({"time": time.time(), **fields}), flush=True)


class _TimedWriter:
    """The member's writer, reporting each commit's start time and whether it was lost (a
    wrapper: the processor's class may be compiled, so its methods cannot be replaced)."""

    def __init__(self, writer: Any, on_commit: Callable[[float, bool], None]) -> None:
        self._writer, self._on_commit = writer, on_commit

    def commit(self, *args: Any, **kwargs: Any) -> Any:
        began = time.time()
        try:
            written = self._writer.commit(*args, **kwargs)
        except TransactionLostError:
            self._on_commit(began, True)
            raise
        self._on_commit(began, False)
        return written

    def __getattr__(self, name: str) -> Any:
        return getattr(self._writer, name)


def main(spec_path: str, result_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    marks: dict[str, float] = {}
    stop = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))

    def handler(event: InputEvent, tx: StateTransaction) -> None:
        if "first" not in marks:
            marks["first"], marks["first_cpu"] = time.monotonic(), _cpu()
        count_payment(event, tx)

    def rebalanced(event: RebalanceEvent) -> None:
        if event.kind == "assigned" and event.tasks:
            marks["assigned_at"] = time.time()
        _line(event=event.kind, member=spec["member"], tasks=event.tasks,
              restored=event.restored_events, seconds=event.seconds)  # fmt: skip

    config = ProcessorConfig(
        spec["processor_id"], (spec["topic"],), store_url=f"rocksdb://{spec['store_dir']}",
        commit_max_events=spec["commit_max_events"], commit_interval_s=spec["commit_interval_s"],
        schemas_enable=False, session_timeout_s=spec["session_timeout_s"],
        transaction_timeout_s=spec["transaction_timeout_s"],
    )  # fmt: skip
    stream = open_stream(f"kafka://{spec['bootstrap']}")
    processor = GroupProcessor(
        config, stream, [PAYMENTS_PER_CUSTOMER], handler, member=spec["member"],
        standby_replicas=spec["standbys"], on_rebalance=rebalanced,
    )  # fmt: skip

    def committed(began: float, lost: bool) -> None:
        marks["last_commit"] = time.monotonic()
        # For the failover timeline: transactions lost, commits that waited, and the first
        # commit after new tasks arrived (their input is processed and visible again).
        if lost:
            _line(event="lost", member=spec["member"], began=began)
        elif began > marks.get("assigned_at", began + 1):
            del marks["assigned_at"]
            _line(event="committed", member=spec["member"], began=began)
        if time.time() - began > 0.3:
            _line(event="slow_commit", member=spec["member"], began=began,
                  took=time.time() - began)  # fmt: skip

    processor.start()
    processor._writer = _TimedWriter(processor._writer, committed)
    _line(event="started", member=spec["member"])
    events = 0
    while not stop["now"]:
        if spec["stop"] == "idle":
            events += processor.run(idle_timeout_s=spec["idle_s"]).events
            break
        until = time.monotonic() + 1.0

        def due(until: float = until) -> bool:
            return stop["now"] or time.monotonic() > until

        events += processor.run(should_stop=due, idle_timeout_s=1.0).events
        _line(event="progress", member=spec["member"], events=events,
              tasks=sorted(processor.tasks), standbys=sorted(processor.standbys))  # fmt: skip
    state = {
        row["customer_id"]: [row["payments"], str(row["total_amount"])]
        for task in processor.tasks.values()
        for row in task.tables.view(PAYMENTS_PER_CUSTOMER).scan()
    }
    result = {
        "member": spec["member"], "events": events,
        "first": marks.get("first"), "last_commit": marks.get("last_commit"),
        "measured_cpu_s": _cpu() - marks.get("first_cpu", 0.0),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "rebalances": len(processor.rebalances), "state": state,
    }  # fmt: skip
    processor.close()
    stream.close()
    Path(result_path).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
