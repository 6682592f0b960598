"""The demo's settings and checks: the reference computed from the input alone, and the report."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from cdc.demo_workload import payment_events, reference_payments, reference_tickets, ticket_events


@dataclass
class Check:
    """One demo check: its name, whether it held, and what was seen."""

    name: str
    ok: bool
    detail: str


@dataclass(frozen=True)
class DemoSettings:
    """What the demo generates, where it writes, and the stream and Spark master it uses."""

    out_dir: Path
    stream_url: str
    payments: int
    customers: int
    tickets: int
    seed: int
    spark_master: str | None


def check_state_rows(
    settings: DemoSettings, payment_rows: Sequence[Any], ticket_rows: Sequence[Any]
) -> tuple[bool, str]:
    """Whether replicated rows of both tables equal the reference, and how many rows there are."""
    want_p, want_t = references(settings)
    p = compare("payments", payments_by_customer(payment_rows), want_p)
    t = compare("tickets", tickets_by_title(ticket_rows), want_t)
    return p.ok and t.ok, f"payments: {p.detail}; tickets: {t.detail}"


def references(
    settings: DemoSettings,
) -> tuple[dict[str, tuple[int, Decimal]], dict[str, tuple[int, Decimal]]]:
    """Both tables as the input alone says they must end: payments, then tickets."""
    return (
        reference_payments(payment_events(settings.payments, settings.customers, settings.seed)),
        reference_tickets(ticket_events(settings.tickets, settings.seed)),
    )


def ticket_reference(settings: DemoSettings) -> dict[str, tuple[int, Decimal]]:
    """Tickets sold and their value per title, from the demo's input alone."""
    return reference_tickets(ticket_events(settings.tickets, settings.seed))


def payments_by_customer(rows: Sequence[Any]) -> dict[str, tuple[int, Decimal]]:
    """Payments and their total per customer, from rows of the payments table."""
    return {r["customer_id"]: (r["payments"], r["total_amount"]) for r in rows}


def tickets_by_title(rows: Sequence[Any]) -> dict[str, tuple[int, Decimal]]:
    """Tickets sold and their value per title, from rows of the tickets table."""
    return {r["title"]: (r["tickets_sold"], r["total_ticket_value"]) for r in rows}


def compare(
    name: str, got: dict[str, tuple[int, Decimal]], want: dict[str, tuple[int, Decimal]]
) -> Check:
    """A check that ``got`` equals ``want``, naming the first differing key."""
    wrong = sorted(k for k in got.keys() | want.keys() if got.get(k) != want.get(k))
    detail = f"{len(got)} rows" if not wrong else (
        f"{len(wrong)} rows differ, first {wrong[0]}: got {got.get(wrong[0])}, "
        f"want {want.get(wrong[0])}"
    )  # fmt: skip
    return Check(name, not wrong, detail)


def report(checks: list[Check], console: Console) -> int:
    """Print every check; 0 if all held, else 1."""
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
