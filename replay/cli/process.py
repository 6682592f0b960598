"""``replicator process``: run one of the example processors over a stream until idle.

It prints one JSON line when started (with the restore report) and one when done, so scripts
(the demo among them) can follow it; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import sys

from cdc.demo_workload import PAYMENTS_TOPIC, TICKET_SALES_TOPIC, demo_handler
from cdc.examples import (
    MOVIE_TICKET_SALES,
    PAYMENTS_PER_CUSTOMER,
    TICKETS_SOLD,
    count_payment,
    sell_ticket,
)
from cdc.processor import EventProcessor, Handler, ProcessorConfig
from cdc.state import StateTable
from cdc.streams.registry import open_stream
from replay.cli import process_group

EXAMPLES: dict[str, tuple[tuple[str, ...], list[StateTable], Handler]] = {
    "demo": (
        (PAYMENTS_TOPIC, TICKET_SALES_TOPIC),
        [PAYMENTS_PER_CUSTOMER, TICKETS_SOLD, MOVIE_TICKET_SALES],
        demo_handler,
    ),
    "payments": ((PAYMENTS_TOPIC,), [PAYMENTS_PER_CUSTOMER], count_payment),
    "tickets": ((TICKET_SALES_TOPIC,), [TICKETS_SOLD], sell_ticket),
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--stream", required=True, help="kafka://host:port or local:///dir")
    p.add_argument("--store", required=True, help="rocksdb:///dir or memory://")
    p.add_argument("--id", default="demo", help="processor id (group, topic prefix)")
    p.add_argument("--example", choices=sorted(EXAMPLES), default="demo")
    p.add_argument("--inputs", help="comma-separated input topics (default: the example's)")
    p.add_argument("--idle-timeout", type=float, default=2.0, help="stop after this idle time")
    p.add_argument("--commit-events", type=int, default=5_000)
    p.add_argument("--no-schemas", action="store_true", help="changelog without Connect schemas")
    p.add_argument(
        "--member",
        help="run as this member of a partitioned processor (a task per input partition; "
        "run the command once per instance, each with its own stable name)",
    )
    p.add_argument(
        "--instances", type=int, help="start this many members here (partitioned processor)"
    )
    p.add_argument(
        "--standby-replicas", type=int, default=0,
        help="members keep warm copies of the tasks they do not own (faster failover)",
    )  # fmt: skip


def run(args: argparse.Namespace) -> int:
    """Run the chosen example processor; exit 0 when the input has been idle long enough (an
    ``UnavailableError`` if the stream cannot be reached then: an outage, not the end)."""
    inputs, tables, handler = EXAMPLES[args.example]
    if args.inputs:
        inputs = tuple(t for t in args.inputs.split(",") if t)
    if args.instances is not None:
        return process_group.run_instances(args)
    config = ProcessorConfig(
        args.id, inputs, store_url=args.store, commit_max_events=args.commit_events,
        schemas_enable=not args.no_schemas,
    )  # fmt: skip
    if args.member:
        return process_group.run_member(args, config, tables, handler)
    stream = open_stream(args.stream)
    processor = EventProcessor(config, stream, tables, handler)
    restored = processor.start()
    print(json.dumps({
        "event": "started", "restored_events": restored.events,
        "restore_seconds": round(restored.seconds, 3), "rebuilt": restored.rebuilt,
        "reason": restored.reason,
    }), flush=True)  # fmt: skip
    report = processor.run(idle_timeout_s=args.idle_timeout)
    try:
        process_group.check_reachable(stream, inputs, report.events, args.idle_timeout)
    finally:
        processor.close()
        stream.close()
    print(json.dumps({
        "event": "done", "events": report.events, "dead_lettered": report.dead_lettered,
        "commits": report.commits, "seconds": round(report.seconds, 3),
    }), flush=True)  # fmt: skip
    print(
        f"processed {report.events} events ({report.dead_lettered} dead-lettered)", file=sys.stderr
    )
    return 0
