"""Factories of the group tests: a local log with the input topic, members of the payments
processor, and the state they hold together."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

from cdc.examples import PAYMENTS_PER_CUSTOMER, count_payment
from cdc.processor import ProcessorConfig
from cdc.processor.group import GroupProcessor
from cdc.streams.local import LocalLog

TOPIC = "payments-in"


def open_group_log(tmp_path: Path) -> LocalLog:
    """A local log under ``tmp_path`` with the input topic (4 partitions)."""
    log = LocalLog.from_url(f"local://{tmp_path}/log")
    log.ensure_topic(TOPIC, 4)
    return log


def member(stream: LocalLog, tmp_path: Path, name: str, **kwargs: object) -> GroupProcessor:
    """A started member ``name`` of the payments processor (stores under ``tmp_path``)."""
    config = ProcessorConfig("pay", (TOPIC,), store_url=f"rocksdb://{tmp_path}/stores",
                             commit_max_events=50)  # fmt: skip
    processor = GroupProcessor(
        config,
        stream,
        [PAYMENTS_PER_CUSTOMER],
        count_payment,
        member=name,
        **kwargs,  # type: ignore[arg-type]
    )
    processor.start()
    return processor


def state(*members: GroupProcessor) -> dict[str, tuple[int, Decimal]]:
    """Every member's payments per customer (a key in two tasks fails)."""
    out: dict[str, tuple[int, Decimal]] = {}
    for m in members:
        for task in m.tasks.values():
            for row in task.tables.view(PAYMENTS_PER_CUSTOMER).scan():
                assert row["customer_id"] not in out, "a key in two tasks"
                out[row["customer_id"]] = (row["payments"], row["total_amount"])
    return out


def run_until_idle(*members: GroupProcessor, rounds: int = 3) -> None:
    """Let each member run ``rounds`` times until idle, in turn."""
    for _ in range(rounds):
        for m in members:
            m.run(idle_timeout_s=0.3)
