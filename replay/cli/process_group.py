"""``replicator process --member NAME`` and ``--instances N``: a partitioned processor.

``--member NAME`` runs one member of the processor's consumer group (start the command once per
instance, on one machine or several, each with its own name); ``--instances N`` starts N members
here as child processes (``<id>-0`` ... ``<id>-<N-1>``) and relays their lines. Each member prints
one JSON line when started, one per change of its tasks (with what their restores applied), and
one when done, with the status of every task it had.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
from collections.abc import Sequence
from dataclasses import asdict

from cdc.errors import UnavailableError, UsageError, one_line
from cdc.processor import Handler, ProcessorConfig
from cdc.processor.group import GroupProcessor
from cdc.processor.queries import MemberQueries
from cdc.processor.tasks import RebalanceEvent
from cdc.state import StateTable
from cdc.streams.partitioner import partition_for
from cdc.streams.protocol import EventStream
from cdc.streams.registry import open_stream, printable_url


def run_member(
    args: argparse.Namespace, config: ProcessorConfig, tables: list[StateTable], handler: Handler
) -> int:
    """Run one member until its input has been idle for ``--idle-timeout``."""
    stream = open_stream(args.stream)
    member = args.member

    def report(event: RebalanceEvent) -> None:
        print(json.dumps({
            "event": event.kind, "member": member, "tasks": event.tasks,
            "restored_events": event.restored_events, "seconds": round(event.seconds, 3),
        }), flush=True)  # fmt: skip

    processor = GroupProcessor(
        config, stream, tables, handler,
        member=member, standby_replicas=args.standby_replicas, on_rebalance=report,
    )  # fmt: skip
    processor.start()
    print(json.dumps({"event": "started", "member": member}), flush=True)
    run = processor.run(idle_timeout_s=args.idle_timeout)
    try:
        check_reachable(stream, config.inputs, run.events, args.idle_timeout)
        status = [asdict(s) for s in MemberQueries(processor).status()]
    finally:
        processor.close()
        stream.close()
    print(json.dumps({
        "event": "done", "member": member, "events": run.events,
        "dead_lettered": run.dead_lettered, "commits": run.commits,
        "seconds": round(run.seconds, 3), "tasks": status,
    }), flush=True)  # fmt: skip
    print(f"member {member}: processed {run.events} events ({run.dead_lettered} dead-lettered)",
          file=sys.stderr)  # fmt: skip
    return 0


def check_reachable(stream: EventStream, inputs: Sequence[str], events: int, idle_s: float) -> None:
    """After a stop for an idle input: an ``UnavailableError`` if the stream cannot be reached
    (an outage starves a processor as the end of its input does; the command would otherwise
    exit 0 as if it had processed everything)."""
    try:
        for topic in inputs:
            stream.partition_count(topic)  # a metadata request (offsets may answer from a cache)
    except UnavailableError as exc:
        raise UnavailableError(
            f"no input for {idle_s:g} s after {events} events, and the stream is unreachable: "
            f"{one_line(exc)}"
        ) from exc


def member_command(args: argparse.Namespace, member: str) -> list[str]:
    """The command line of one member started by ``--instances``."""
    command = [
        sys.executable, "-m", "replay.cli.main", "process", "--stream", args.stream,
        "--store", args.store, "--id", args.id, "--example", args.example,
        "--idle-timeout", str(args.idle_timeout), "--commit-events", str(args.commit_events),
        "--member", member, "--standby-replicas", str(args.standby_replicas),
    ]  # fmt: skip
    if args.inputs:
        command += ["--inputs", args.inputs]
    if args.no_schemas:
        command.append("--no-schemas")
    return command


def run_instances(args: argparse.Namespace) -> int:
    """Start ``--instances`` members as child processes and wait for all of them."""
    if args.instances < 1:
        raise UsageError(f"--instances must be at least 1, not {args.instances}")
    children = [
        subprocess.Popen(member_command(args, f"{args.id}-{k}"), stdout=subprocess.PIPE, text=True)
        for k in range(args.instances)
    ]

    def relay(child: subprocess.Popen[str]) -> None:
        assert child.stdout is not None
        for line in child.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()

    relays = [threading.Thread(target=relay, args=(c,), daemon=True) for c in children]
    for thread in relays:
        thread.start()
    try:
        codes = [child.wait() for child in children]
    except KeyboardInterrupt:
        for child in children:
            child.terminate()
        raise
    for thread in relays:
        thread.join(timeout=5)
    failed = [f"{args.id}-{k} exited {code}" for k, code in enumerate(codes) if code]
    if failed:
        print(f"replicator process: {', '.join(failed)}", file=sys.stderr)
    return max(codes)


def add_owners_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--stream", required=True, help="kafka://host:port or local:///dir")
    p.add_argument("--id", required=True, help="the partitioned processor's id (its group)")
    p.add_argument("--input", required=True, help="one of its input topics")
    p.add_argument("--key", help="an input key: print only the member that has its task")


def run_owners(args: argparse.Namespace) -> int:
    """Print which member has each task of a running partitioned processor (one JSON line), or
    with ``--key`` the one that has that key's task: where to send a query for the key."""
    stream = open_stream(args.stream)
    try:
        if args.input not in stream.topics():
            raise UsageError(f"no input topic {args.input} on {printable_url(args.stream)}")
        owners = stream.task_owners(args.id, args.input)
        if args.key is None:
            print(json.dumps({"processor": args.id, "tasks": owners}), flush=True)
            return 0
        task = partition_for(args.key.encode(), stream.partition_count(args.input))
    finally:
        stream.close()
    # None: no member has the task right now (a rebalance, or the processor is not running).
    print(json.dumps({"key": args.key, "task": task, "member": owners.get(task)}), flush=True)
    return 0 if task in owners else 1
