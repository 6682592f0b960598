"""The demo's processor part: generate the input, run the processor in a child process, kill it
with SIGKILL mid-stream, delete its local store, append the rest of the input while it is down,
restart it (it restores from the changelog and finishes), and check its state."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from itertools import islice
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress

from cdc.demo_workload import (
    PAYMENTS_TOPIC,
    TICKET_SALES_TOPIC,
    payment_events,
    produce,
    ticket_events,
)
from cdc.examples import PAYMENTS_PER_CUSTOMER, TICKETS_SOLD
from cdc.state import StateTables, open_state_store
from cdc.streams.protocol import EventStream
from replay.demo.checks import (
    Check,
    DemoSettings,
    compare,
    payments_by_customer,
    references,
    tickets_by_title,
)

PROCESSOR_ID = "demo"
INPUTS = (PAYMENTS_TOPIC, TICKET_SALES_TOPIC)
_FIRST_PART = 0.6
"""The share of the input there before the crash; the rest arrives while the processor is down."""


def _processor(settings: DemoSettings, store: Path, idle_timeout_s: float) -> subprocess.Popen[str]:
    cmd = [
        sys.executable, "-m", "replay.cli.main", "process", "--stream", settings.stream_url,
        "--store", f"rocksdb://{store}", "--id", PROCESSOR_ID,
        "--idle-timeout", str(idle_timeout_s),
    ]  # fmt: skip
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _consumed(stream: EventStream) -> int:
    return sum(
        sum(stream.committed_positions(PROCESSOR_ID, topic).values())
        for topic in (PAYMENTS_TOPIC, TICKET_SALES_TOPIC)
    )


def generate(
    settings: DemoSettings, stream: EventStream, console: Console, part: tuple[float, float]
) -> int:
    """Append the ``part`` (fractions from, to) of the input; returns the events appended."""
    stream.ensure_topic(PAYMENTS_TOPIC, 4)
    stream.ensure_topic(TICKET_SALES_TOPIC, 2)
    p0, p1 = (int(settings.payments * f) for f in part)
    t0, t1 = (int(settings.tickets * f) for f in part)
    payments = payment_events(settings.payments, settings.customers, settings.seed)
    tickets = ticket_events(settings.tickets, settings.seed)
    with Progress(console=console) as progress:
        task = progress.add_task(
            f"generating input {part[0]:.0%}-{part[1]:.0%}", total=p1 - p0 + t1 - t0
        )
        advance = lambda n: progress.advance(task, n)  # noqa: E731
        produce(stream, PAYMENTS_TOPIC, islice(payments, p0, p1), key="customer_id",
                progress=advance)  # fmt: skip
        produce(stream, TICKET_SALES_TOPIC, islice(tickets, t0, t1), key="title",
                progress=advance)  # fmt: skip
    return p1 - p0 + t1 - t0


def crash_and_restore(
    settings: DemoSettings, stream: EventStream, console: Console, checks: list[Check]
) -> None:
    """Input arrives in two parts: the processor is killed while it works on the first (once it
    has committed half of all input, or all of the first part), the second part arrives while
    it is down, and the restarted processor restores its deleted store and finishes."""
    store = settings.out_dir / "state"
    total = settings.payments + settings.tickets
    first = generate(settings, stream, console, (0.0, _FIRST_PART))
    child = _processor(settings, store, idle_timeout_s=600)
    with Progress(console=console) as progress:
        task = progress.add_task("processing (until the crash)", total=total)
        while child.poll() is None:
            done = _consumed(stream)
            progress.update(task, completed=done)
            if done >= min(total // 2, first):
                child.kill()  # SIGKILL: a real crash, no clean shutdown
                break
            time.sleep(0.2)
    child.wait()
    at = _consumed(stream)
    killed = child.returncode == -9
    checks.append(Check("processor killed mid-stream", killed and at < total,
                        f"SIGKILL after {at} of {total} input events were committed"))  # fmt: skip
    shutil.rmtree(store, ignore_errors=True)
    console.print(f"[yellow]crashed[/] at {at}/{total} committed events; local store deleted")
    generate(settings, stream, console, (_FIRST_PART, 1.0))
    child = _processor(settings, store, idle_timeout_s=2)
    out, err = child.communicate()
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    started: dict[str, Any] = next((x for x in lines if x["event"] == "started"), {})
    finished: dict[str, Any] = next((x for x in lines if x["event"] == "done"), {})
    ok = child.returncode == 0 and bool(started) and bool(finished)
    restored, seconds = started.get("restored_events", 0), started.get("restore_seconds", 0.0)
    rate = f"{restored / seconds:,.0f} events/s" if seconds else "-"
    checks.append(Check("restored from the changelog and finished", ok,
                        f"restored {restored} changelog events in {seconds}s ({rate}); "
                        f"then processed {finished.get('events', '?')} events"
                        + ("" if ok else f"; stderr: {err[-500:]}")))  # fmt: skip
    check_state(settings, store, checks)


def check_state(settings: DemoSettings, store: Path, checks: list[Check]) -> None:
    state = StateTables(
        open_state_store(f"rocksdb://{store}"), [PAYMENTS_PER_CUSTOMER, TICKETS_SOLD]
    )
    try:
        payments = list(state.view(PAYMENTS_PER_CUSTOMER).scan())
        tickets = list(state.view(TICKETS_SOLD).scan())
    finally:
        state.store.close()
    want_p, want_t = references(settings)
    checks.append(
        compare("payments per customer equal the reference", payments_by_customer(payments), want_p)
    )
    checks.append(
        compare("tickets sold per title equal the reference", tickets_by_title(tickets), want_t)
    )
