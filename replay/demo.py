"""``replicator demo``: the seeds' scenario end to end, on embedded defaults.

1. generate payments and movie-ticket sales (with a few malformed payments);
2. run the event processor in a child process: payments counted per customer, tickets per title,
   every write captured on the changelog;
3. kill it with SIGKILL mid-stream, delete its local store, append the rest of the input, restart
   it: it restores from the changelog and finishes; the state is checked against a reference
   computed from the input;
4. replay the changelog on Spark (see :mod:`replay.demo_replay`).
Exit status 0 only if every check held.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from itertools import islice
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from cdc.demo_workload import (
    PAYMENTS_TOPIC,
    TICKET_SALES_TOPIC,
    payment_events,
    produce,
    reference_payments,
    reference_tickets,
    ticket_events,
)
from cdc.examples import PAYMENTS_PER_CUSTOMER, TICKETS_SOLD
from cdc.state import StateTables, open_state_store
from cdc.streams.protocol import EventStream
from cdc.streams.registry import open_stream

PROCESSOR_ID = "demo"
_INPUTS = (PAYMENTS_TOPIC, TICKET_SALES_TOPIC)
_FIRST_PART = 0.6
"""The share of the input there before the crash; the rest arrives while the processor is down."""


@dataclass
class Check:
    name: str
    ok: bool
    detail: str


@dataclass(frozen=True)
class DemoSettings:
    out_dir: Path
    stream_url: str
    payments: int
    customers: int
    tickets: int
    seed: int
    spark_master: str | None


def _processor(settings: DemoSettings, store: Path, idle_timeout_s: float) -> subprocess.Popen[str]:
    cmd = [
        sys.executable, "-m", "replay.cli", "process", "--stream", settings.stream_url,
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
    want_p, want_t = _references(settings)
    checks.append(
        _compare("payments per customer equal the reference", _payments(payments), want_p)
    )
    checks.append(_compare("tickets sold per title equal the reference", _tickets(tickets), want_t))


def check_state_rows(
    settings: DemoSettings, payment_rows: Sequence[Any], ticket_rows: Sequence[Any]
) -> tuple[bool, str]:
    """Whether replicated rows of both tables equal the reference, and how many rows there are."""
    want_p, want_t = _references(settings)
    p = _compare("payments", _payments(payment_rows), want_p)
    t = _compare("tickets", _tickets(ticket_rows), want_t)
    return p.ok and t.ok, f"payments: {p.detail}; tickets: {t.detail}"


def _references(
    settings: DemoSettings,
) -> tuple[dict[str, tuple[int, Decimal]], dict[str, tuple[int, Decimal]]]:
    return (
        reference_payments(payment_events(settings.payments, settings.customers, settings.seed)),
        reference_tickets(ticket_events(settings.tickets, settings.seed)),
    )


def ticket_reference(settings: DemoSettings) -> dict[str, tuple[int, Decimal]]:
    """Tickets sold and their value per title, from the demo's input alone."""
    return reference_tickets(ticket_events(settings.tickets, settings.seed))


def _payments(rows: Sequence[Any]) -> dict[str, tuple[int, Decimal]]:
    return {r["customer_id"]: (r["payments"], r["total_amount"]) for r in rows}


def _tickets(rows: Sequence[Any]) -> dict[str, tuple[int, Decimal]]:
    return {r["title"]: (r["tickets_sold"], r["total_ticket_value"]) for r in rows}


def _compare(
    name: str, got: dict[str, tuple[int, Decimal]], want: dict[str, tuple[int, Decimal]]
) -> Check:
    wrong = sorted(k for k in got.keys() | want.keys() if got.get(k) != want.get(k))
    detail = f"{len(got)} rows" if not wrong else (
        f"{len(wrong)} rows differ, first {wrong[0]}: got {got.get(wrong[0])}, "
        f"want {want.get(wrong[0])}"
    )  # fmt: skip
    return Check(name, not wrong, detail)


def report(checks: list[Check], console: Console) -> int:
    table = Table(title="demo checks")
    table.add_column("check")
    table.add_column("result")
    table.add_column("detail")
    for c in checks:
        table.add_row(c.name, "[green]ok[/]" if c.ok else "[red]FAILED[/]", c.detail)
    console.print(table)
    failed = [c.name for c in checks if not c.ok]
    if failed:
        console.print(f"[red]demo failed:[/] {'; '.join(failed)}")
        return 1
    console.print("[green]every check held[/]")
    return 0


def run_demo(settings: DemoSettings, console: Console | None = None) -> int:
    """Run the whole demo; 0 if every check held."""
    console = console or Console()
    if settings.out_dir.exists():
        shutil.rmtree(settings.out_dir)
    settings.out_dir.mkdir(parents=True)
    stream = open_stream(settings.stream_url)
    leftovers = [t for t in stream.topics() if t in _INPUTS or t.startswith(f"{PROCESSOR_ID}.")]
    if leftovers:
        stream.close()
        console.print(
            f"[red]demo:[/] {settings.stream_url} already holds topics of an earlier demo run "
            f"({', '.join(sorted(leftovers))}); the checks need fresh topics: delete them "
            "(kafka-topics.sh --delete) or use a fresh broker"
        )
        return 2
    checks: list[Check] = []
    started = time.monotonic()
    try:
        crash_and_restore(settings, stream, console, checks)
        from replay.demo_replay import replay_and_verify

        replay_and_verify(settings, stream, console, checks)
    finally:
        stream.close()
    console.print(f"demo took {time.monotonic() - started:.1f}s; output in {settings.out_dir}")
    return report(checks, console)
