"""Our side of the benchmark, one measurement per process (in the project venv).

``python -m bench.processor.ours_worker SPEC_JSON RESULT_JSON``; the spec names the ``mode``:

- ``process``: a fresh processor (new id: new consumer group and changelog topics) counts the
  whole input topic with ``count_payment``, exactly-once, RocksDB state, changelog capture on.
  Throughput is ``events / (final commit done - first event handled)``.
- ``restore``: the same processor id again, its store directory deleted by the driver:
  ``EventProcessor.start()`` rebuilds it from the changelog and returns the ``RestoreReport``.

Either way the final state is dumped into the result for the driver to check.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

from cdc.examples import PAYMENTS_PER_CUSTOMER, count_payment
from cdc.processor import EventProcessor, InputEvent, ProcessorConfig
from cdc.state import StateTransaction
from cdc.streams.registry import open_stream


def _cpu() -> float:
    times = os.times()
    return times.user + times.system


def _processor(spec: dict[str, Any], handler: Any) -> EventProcessor:
    config = ProcessorConfig(
        spec["processor_id"],
        (spec["topic"],),
        store_url=f"rocksdb://{spec['store_dir']}",
        commit_max_events=spec["commit_max_events"],
        commit_interval_s=spec["commit_interval_s"],
        schemas_enable=spec["schemas_enable"],
    )
    stream = open_stream(f"kafka://{spec['bootstrap']}")
    return EventProcessor(config, stream, [PAYMENTS_PER_CUSTOMER], handler)


def _dump(processor: EventProcessor) -> dict[str, list[object]]:
    assert processor.tables is not None
    return {
        row["customer_id"]: [row["payments"], str(row["total_amount"])]
        for row in processor.tables.view(PAYMENTS_PER_CUSTOMER).scan()
    }


def main(spec_path: str, result_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    first: list[float] = []

    def handler(event: InputEvent, tx: StateTransaction) -> None:
        if not first:
            first.append(time.monotonic())
            first.append(_cpu())
        count_payment(event, tx)

    processor = _processor(spec, handler)
    began, began_cpu = time.monotonic(), _cpu()
    restored = processor.start()
    started, started_cpu = time.monotonic(), _cpu()
    result: dict[str, Any] = {"mode": spec["mode"], "start_s": started - began}
    if spec["mode"] == "process":
        report = processor.run(max_events=spec["events"], idle_timeout_s=60.0)
        done = time.monotonic()
        result.update(
            events=report.events,
            dead_lettered=report.dead_lettered,
            commits=report.commits,
            seconds=done - first[0] if first else 0.0,
            run_seconds=report.seconds,
            measured_cpu_s=_cpu() - first[1] if first else 0.0,
        )
    else:
        result.update(
            events=restored.events,
            seconds=restored.seconds,
            rebuilt=restored.rebuilt,
            measured_cpu_s=started_cpu - began_cpu,  # the whole start(): restore is most of it
        )
    result.update(
        events_per_s=result["events"] / result["seconds"] if result["seconds"] else 0.0,
        cpu_s=_cpu(),
        peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        state=_dump(processor),
    )
    processor.close()
    processor.stream.close()
    Path(result_path).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
