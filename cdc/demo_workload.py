"""The demo's input: payments and movie-ticket sales, generated reproducibly from a seed, and
the reference state computed from that input alone (independently of the processor)."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from decimal import Decimal

from cdc.examples import count_payment, record_ticket_sale, sell_ticket
from cdc.processor import InputEvent
from cdc.state import StateTransaction
from cdc.streams.protocol import EventStream

PAYMENTS_TOPIC = "payments"
TICKET_SALES_TOPIC = "movie_ticket_sales"
TITLES = (
    "Arrival", "Blade Runner 2049", "Dune", "Everything Everywhere All at Once", "Heat",
    "In the Mood for Love", "Mad Max: Fury Road", "Parasite", "Spirited Away", "The Matrix",
    "Whiplash", "Zodiac",
)  # fmt: skip


def payment_events(count: int, customers: int, seed: int) -> Iterator[dict[str, str]]:
    """Payments of random customers; a few per thousand are malformed on purpose."""
    rng = random.Random(seed)
    for i in range(count):
        if i % 997 == 500:
            yield {"customer_id": "", "amount": "oops"}  # dead-lettered by the processor
            continue
        cents = int(rng.lognormvariate(7.5, 1.0)) + 1
        yield {"customer_id": f"c{rng.randrange(customers):06d}", "amount": f"{cents / 100:.2f}"}


def ticket_events(count: int, seed: int) -> Iterator[dict[str, str]]:
    """Ticket sales over a dozen titles, skewed towards the popular ones."""
    rng = random.Random(seed + 1)
    weights = [1 / (rank + 1) for rank in range(len(TITLES))]
    for _ in range(count):
        title = rng.choices(TITLES, weights)[0]
        seats = rng.randint(1, 4)
        yield {"title": title, "total_ticket_value": f"{seats * rng.choice((9, 12, 15))}.50"}


def produce(
    stream: EventStream, topic: str, events: Iterator[dict[str, str]], *,
    key: str, batch: int = 5_000, progress: Callable[[int], None] | None = None,
) -> int:  # fmt: skip
    """Append ``events`` to ``topic`` as JSON, keyed by ``key``, in transactions of ``batch``."""
    writer = stream.writer(f"demo-feeder-{topic}")
    sent = 0
    writer.begin()
    for event in events:
        writer.send(topic, event.get(key, "").encode() or None, json.dumps(event).encode())
        sent += 1
        if sent % batch == 0:
            writer.commit()
            writer.begin()
            if progress:
                progress(batch)
    writer.commit()
    writer.close()
    if progress:
        progress(sent % batch)
    return sent


def demo_handler(event: InputEvent, tx: StateTransaction) -> None:
    """Payments are counted per customer; ticket sales per title, and each sale is kept as a
    row of ``movie_ticket_sales`` (the source table of the seeds' SQL projection)."""
    if event.topic == TICKET_SALES_TOPIC:
        sell_ticket(event, tx)
        record_ticket_sale(event, tx)
    else:
        count_payment(event, tx)


def reference_payments(events: Iterator[dict[str, str]]) -> dict[str, tuple[int, Decimal]]:
    """Payments and total per customer, from the input alone (malformed payments skipped)."""
    out: dict[str, tuple[int, Decimal]] = {}
    for p in events:
        if not p.get("customer_id"):
            continue
        n, total = out.get(p["customer_id"], (0, Decimal("0.00")))
        out[p["customer_id"]] = (n + 1, total + Decimal(p["amount"]))
    return out


def reference_tickets(events: Iterator[dict[str, str]]) -> dict[str, tuple[int, Decimal]]:
    """Tickets sold and their value per title, from the input alone."""
    out: dict[str, tuple[int, Decimal]] = {}
    for s in events:
        n, total = out.get(s["title"], (0, Decimal("0.00")))
        out[s["title"]] = (n + 1, total + Decimal(s["total_ticket_value"]))
    return out
