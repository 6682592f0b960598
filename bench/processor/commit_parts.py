"""Where one processor's main thread spends its time against the real broker: the writer's calls
(send, commit) and the producer calls inside a commit, the reader's polls, per run.

    .venv/bin/python -m bench.processor.commit_parts [--events 200000] [--schemaless] [--trials 2]

Starts a broker, produces the benchmark's input once, then runs ``EventProcessor.run`` over it
``--trials`` times (a new processor id each time), with the writer, its producer and the reader
wrapped in timers (wrappers: the classes may be compiled, so their methods cannot be replaced).
The wrappers add about half a microsecond per call. The rest of the run time is the processing
itself (``python_path`` measures that without a broker).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.processor.run import TOPIC, produce_input
from cdc.examples import PAYMENTS_PER_CUSTOMER, count_payment
from cdc.processor import EventProcessor, ProcessorConfig
from cdc.runtime.broker import LocalKafkaBroker
from cdc.streams.registry import open_stream

Totals = dict[str, list[float]]


class _Timed:
    """Forwards every call to ``inner``, adding its count and seconds to ``totals``."""

    def __init__(self, inner: Any, name: str, totals: Totals) -> None:
        self._inner, self._name, self._totals = inner, name, totals

    def __getattr__(self, attribute: str) -> Any:
        found = getattr(self._inner, attribute)
        if not callable(found):
            return found
        return self._timed(found, f"{self._name}.{attribute}")

    def _timed(self, call: Callable[..., Any], key: str) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            began = time.perf_counter()
            try:
                return call(*args, **kwargs)
            finally:
                total = self._totals.setdefault(key, [0, 0.0])
                total[0] += 1
                total[1] += time.perf_counter() - began

        return timed


def _trial(bootstrap: str, store: Path, name: str, args: argparse.Namespace) -> None:
    stream = open_stream(f"kafka://{bootstrap}")
    config = ProcessorConfig(
        name, (TOPIC,), store_url=f"rocksdb://{store}", commit_max_events=5000,
        commit_interval_s=0.2, schemas_enable=not args.schemaless,
    )  # fmt: skip
    processor = EventProcessor(config, stream, [PAYMENTS_PER_CUSTOMER], count_payment)
    processor.start()
    totals: Totals = {}
    writer = processor._writer
    writer._producer = _Timed(writer._producer, "producer", totals)  # type: ignore[union-attr]
    processor._writer = _Timed(writer, "writer", totals)
    processor._reader = _Timed(processor._reader, "reader", totals)
    began, cpu = time.perf_counter(), os.times()
    report = processor.run(max_events=args.events, idle_timeout_s=30)
    wall, after = time.perf_counter() - began, os.times()
    used = after.user + after.system - cpu.user - cpu.system
    print(f"{name}: {report.events:,} events in {wall:.2f} s ({report.events / wall:,.0f}/s), "
          f"CPU {used:.2f} s, {report.commits} commits")  # fmt: skip
    for key, (calls, seconds) in sorted(totals.items(), key=lambda kv: -kv[1][1]):
        print(f"  {key:40s} {int(calls):>8,} calls {seconds:7.2f} s ({seconds / wall:5.1%})")
    processor.close()
    stream.close()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--customers", type=int, default=50_000)
    parser.add_argument("--schemaless", action="store_true")
    parser.add_argument("--trials", type=int, default=2)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="commit-parts-"))
    broker = LocalKafkaBroker(work / "broker", heap="1g")
    bootstrap = broker.start()
    try:
        produce_input(bootstrap, args.events, args.customers, 7)
        for trial in range(args.trials):
            _trial(bootstrap, work / f"store-{trial}", f"commit-parts-{trial}", args)
    finally:
        broker.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
