"""A projection batch's source mirror and master written side by side.

A batch of a SQL projection ends with two commits of about the same cost (Delta's snapshot
state, the write job, the commit, each planned on the driver): the source mirror's, then the
master's, which carries the ledger entry (``delta_projection``). Once the batch's signed rows
are materialised neither write reads what the other writes, so where both tables are small
enough to be rewritten by one overwrite (``delta_rewrite``), the two run at once from two threads
and a ``--follow`` round waits for the longer one instead of their sum (``bench/README.md``).
The session's confs are shared by the threads, so these writes take the ledger metadata and the
idempotent-write id as writer options instead.

The master may then commit before the mirror: the batch first stages the mirror's input, with
which recovery brings a mirror left behind forward (``delta_recovery``).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from projections.sql.syntax import SPARK
from replay.sinks.delta_recovery import stage, unstage
from replay.sinks.sql_projection import MirrorSql
from replay.spark import DataFrame

if TYPE_CHECKING:
    from replay.sinks.delta_projection import DeltaProjectionStore

BATCH_VIEW = "__projection_batch"
"""The temporary view of the batch's changes (``batch_changes`` columns) the statements read."""


def master_app_id(table: str) -> str:
    """The idempotent-write id (``txnAppId``) of a projection's master table."""
    return f"replicator-projection/{table}"


@dataclass(frozen=True)
class Overwrite:
    """The new contents ``rows`` of the Delta table at ``path``, from the MERGE source ``source``,
    written with the writer ``options`` (``userMetadata``, ``txnAppId``, ``txnVersion``)."""

    path: str
    rows: DataFrame
    source: DataFrame
    options: Mapping[str, str] = field(default_factory=dict)

    def save(self) -> None:
        """Commit the overwrite."""
        writer = self.rows.write.format("delta").mode("overwrite")
        for key, value in self.options.items():
            writer = writer.option(key, value)
        writer.save(self.path)


def commit_side_by_side(
    store: DeltaProjectionStore, tables: Sequence[str], mirror: MirrorSql, master_merge: str,
    seq: int, meta: str,
) -> bool:  # fmt: skip
    """Stage the mirror's input of batch ``seq``, then overwrite the mirror and the master
    ``tables[0]`` (its MERGE ``master_merge`` over ``tables``, the ledger entry ``meta``) at
    once, if both are rewritten; False, with nothing written, if not."""
    table = tables[0]
    mirror_write = store.rewrite(
        mirror.merge_sql(BATCH_VIEW, SPARK), tables, {"userMetadata": meta}
    )
    ledger = {"userMetadata": meta, "txnAppId": master_app_id(table), "txnVersion": str(seq)}
    master_write = store.rewrite(master_merge, tables, ledger)
    if mirror_write is None or master_write is None:
        return False
    stage(store.registry, mirror.table, seq, mirror_write.source)
    write_side_by_side([mirror_write, master_write])
    unstage(store.registry, mirror.table)
    return True


def write_side_by_side(writes: Sequence[Overwrite]) -> None:
    """Commit ``writes`` at once (the last in the calling thread) and wait for all of them; raise
    the first failure once every write has ended."""
    failures: list[BaseException] = []

    def save(write: Overwrite) -> None:
        try:
            write.save()
        except BaseException as exc:  # raised in the caller, once the other writes have ended
            failures.append(exc)

    others = [threading.Thread(target=save, args=(w,), name="delta-write") for w in writes[:-1]]
    for thread in others:
        thread.start()
    save(writes[-1])
    for thread in others:
        thread.join()
    if failures:
        raise failures[0]
