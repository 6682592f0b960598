"""A payments processor run as a separate process, for the kill -9 tests and benchmarks.

Usage: python -m tests.cdc.processor.crash_worker STREAM_URL STORE_URL PROCESSOR_ID INPUT_TOPIC
[IDLE_S]. Processes until the input has been idle for IDLE_S seconds, then exits 0.
"""

from __future__ import annotations

import sys

from cdc.examples import PAYMENTS_PER_CUSTOMER, count_payment
from cdc.processor import EventProcessor, ProcessorConfig
from cdc.streams.registry import open_stream


def main(argv: list[str]) -> int:
    stream_url, store_url, processor_id, topic = argv[:4]
    idle_s = float(argv[4]) if len(argv) > 4 else 1.0
    stream = open_stream(stream_url)
    config = ProcessorConfig(
        processor_id, (topic,), store_url=store_url, commit_max_events=100, commit_interval_s=0.05
    )
    processor = EventProcessor(config, stream, [PAYMENTS_PER_CUSTOMER], count_payment)
    processor.start()
    print("started", flush=True)
    processor.run(idle_timeout_s=idle_s)
    processor.close()
    stream.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
