"""The seeds' examples as state tables and processor functions (used by the README, the demo,
the tests and the benchmarks): payments counted per customer, movie tickets sold per title."""

from __future__ import annotations

from decimal import Decimal

from cdc.processor import InputEvent, RejectEvent
from cdc.state import StateTable, StateTransaction

CENTS = Decimal("0.01")

PAYMENTS_PER_CUSTOMER = StateTable(
    "payments_per_customer",
    {"customer_id": str, "payments": int, "total_amount": Decimal},
    key="customer_id",
    scales={"total_amount": 2},
)
"""Payments counted and summed per customer."""

TICKETS_SOLD = StateTable(
    "tickets_sold_per_title",
    {"title": str, "tickets_sold": int, "total_ticket_value": Decimal},
    key="title",
    scales={"total_ticket_value": 2},
)
"""Movie tickets sold per title."""


def _money(value: object, field: str) -> Decimal:
    amount = Decimal(str(value))
    if not amount.is_finite() or amount < 0:
        raise RejectEvent(f"{field} must be a non-negative amount, not {value!r}")
    return amount.quantize(CENTS)


def count_payment(event: InputEvent, tx: StateTransaction) -> None:
    """``{"customer_id": "c-1", "amount": "12.50"}`` -> one more payment for the customer."""
    payment = event.value
    if not isinstance(payment, dict) or not payment.get("customer_id"):
        raise RejectEvent("a payment needs a customer_id")
    amount = _money(payment.get("amount"), "amount")
    table = tx[PAYMENTS_PER_CUSTOMER]
    row = table.get(str(payment["customer_id"]))
    payments = row["payments"] if row else 0
    total = row["total_amount"] if row else Decimal("0.00")
    table.put(
        {
            "customer_id": str(payment["customer_id"]),
            "payments": payments + 1,
            "total_amount": total + amount,
        }
    )


def sell_ticket(event: InputEvent, tx: StateTransaction) -> None:
    """``{"title": "Dune", "total_ticket_value": "24.00"}`` -> one more ticket for the title."""
    sale = event.value
    if not isinstance(sale, dict) or not sale.get("title"):
        raise RejectEvent("a ticket sale needs a title")
    value = _money(sale.get("total_ticket_value"), "total_ticket_value")
    table = tx[TICKETS_SOLD]
    row = table.get(str(sale["title"]))
    table.put(
        {
            "title": str(sale["title"]),
            "tickets_sold": (row["tickets_sold"] if row else 0) + 1,
            "total_ticket_value": (row["total_ticket_value"] if row else Decimal("0.00")) + value,
        }
    )


MOVIE_TICKET_SALES = StateTable(
    "movie_ticket_sales",
    {"sale_id": str, "title": str, "total_ticket_value": Decimal},
    key="sale_id",
    scales={"total_ticket_value": 2},
)
"""Every ticket sale, keyed by its input position: the source table of the seeds' projection
``SELECT title, COUNT(total_ticket_value) AS tickets_sold FROM movie_ticket_sales GROUP BY title``
(its changelog topic is ``<processor>.movie_ticket_sales``)."""


def record_ticket_sale(event: InputEvent, tx: StateTransaction) -> None:
    """``{"title": "Dune", "total_ticket_value": "24.00"}`` -> one row of ``MOVIE_TICKET_SALES``
    (``sale_id`` is ``<topic>-<partition>-<offset>`` of the input event)."""
    sale = event.value
    if not isinstance(sale, dict) or not sale.get("title"):
        raise RejectEvent("a ticket sale needs a title")
    tx[MOVIE_TICKET_SALES].put(
        {
            "sale_id": f"{event.topic}-{event.partition}-{event.offset}",
            "title": str(sale["title"]),
            "total_ticket_value": _money(sale.get("total_ticket_value"), "total_ticket_value"),
        }
    )
