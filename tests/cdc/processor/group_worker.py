"""A member of a partitioned payments processor run as a separate process, for the kill -9
trials and the scale-out benchmark.

Usage: python -m tests.cdc.processor.group_worker STREAM_URL STORE_ROOT PROCESSOR_ID
INPUT_TOPIC MEMBER IDLE_S [STANDBYS] [WANT_TASKS]. Processes until the input has been idle for
IDLE_S seconds while the member owns at least WANT_TASKS tasks (default 0), then prints one
JSON line (its tasks and figures) and exits 0.
"""

from __future__ import annotations

import json
import sys
import time

from cdc.examples import PAYMENTS_PER_CUSTOMER, count_payment
from cdc.processor import ProcessorConfig
from cdc.processor.group import GroupProcessor
from cdc.streams.registry import open_stream

SESSION_TIMEOUT_S = 2.0
TRANSACTION_TIMEOUT_S = 3.0


def main(argv: list[str]) -> int:
    stream_url, store_root, processor_id, topic, member = argv[:5]
    idle_s = float(argv[5])
    standbys = int(argv[6]) if len(argv) > 6 else 0
    want_tasks = int(argv[7]) if len(argv) > 7 else 0
    stream = open_stream(stream_url)
    config = ProcessorConfig(
        processor_id, (topic,), store_url=f"rocksdb://{store_root}",
        commit_max_events=100, commit_interval_s=0.05,
        session_timeout_s=SESSION_TIMEOUT_S, transaction_timeout_s=TRANSACTION_TIMEOUT_S,
    )  # fmt: skip
    processor = GroupProcessor(
        config, stream, [PAYMENTS_PER_CUSTOMER], count_payment,
        member=member, standby_replicas=standbys,
    )  # fmt: skip
    processor.start()
    print(json.dumps({"event": "started", "member": member}), flush=True)
    events, started = 0, time.monotonic()
    deadline = started + 120
    while True:  # a run ends after IDLE_S without input or a change of tasks
        events += processor.run(idle_timeout_s=idle_s).events
        if len(processor.tasks) >= want_tasks or time.monotonic() > deadline:
            break
    tasks = sorted(processor.tasks)
    restored = {p: t.restored_events for p, t in processor.tasks.items()}
    rebalances = len(processor.rebalances)
    processor.close()
    stream.close()
    print(json.dumps({
        "event": "done", "member": member, "tasks": tasks, "events": events,
        "restored": restored, "rebalances": rebalances,
        "seconds": round(time.monotonic() - started, 3),
    }), flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
