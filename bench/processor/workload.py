"""The benchmark's input: payments over many customers, and the reference state they must give.

Values are ``{"customer_id": "c17", "amount": "12.50"}`` (the input of ``cdc.examples.
count_payment``), keyed by the customer id so a key-partitioned state store (quixstreams') sees
every payment of a customer on one partition. The same seed gives the same events.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from decimal import Decimal

Event = tuple[bytes, bytes]
"""(key, value) of one input record."""

Reference = dict[str, tuple[int, Decimal]]
"""Per customer: payments counted and their exact total."""


def payment_events(count: int, customers: int, seed: int) -> Iterator[Event]:
    """``count`` payments of 0.01-999.99 over ``customers`` customer ids, deterministic."""
    rng = random.Random(seed)
    for _ in range(count):
        customer = f"c{rng.randrange(customers)}"
        amount = f"{rng.randrange(1, 100_000) // 100}.{rng.randrange(100):02d}"
        value = json.dumps({"customer_id": customer, "amount": amount}, separators=(",", ":"))
        yield customer.encode(), value.encode()


def reference_state(events: Iterator[Event]) -> Reference:
    """The state both systems must end with: per customer, the payment count and exact sum."""
    state: Reference = {}
    for _, value in events:
        payment = json.loads(value)
        n, total = state.get(payment["customer_id"], (0, Decimal("0.00")))
        state[payment["customer_id"]] = (n + 1, total + Decimal(payment["amount"]))
    return state


def compare(reference: Reference, found: dict[str, list[object]]) -> list[str]:
    """Differences between the reference and a dumped state ``{customer: [count, "total"]}``;
    empty when they are equal (at most 5 listed, then the number of the others)."""
    problems: list[str] = []
    for customer in sorted(reference.keys() | found.keys()):
        want = reference.get(customer)
        got = found.get(customer)
        got_t = None if got is None else (int(str(got[0])), Decimal(str(got[1])))
        if want != got_t:
            problems.append(f"{customer}: expected {want}, found {got_t}")
    return problems[:5] + ([f"... {len(problems) - 5} more"] if len(problems) > 5 else [])
