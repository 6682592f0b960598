"""A projection version's Delta tables brought back to its last committed batch, before each batch.

The rules (``delta_projection``'s module doc has the commits they rely on):

- the master is restored (Delta ``RESTORE``) to its latest ledger entry, dropping commits made
  after it (a crashed batch's creation, say);
- a source mirror that batch left behind is brought forward with the batch's **staged** input:
  where the mirror and the master are written side by side (``delta_pair``) the master may commit
  first, so the batch stages the mirror's input (its changes, as the mirror's MERGE reads them)
  before either write, as Parquet in ``<registry>/staged/<mirror table>/<seq>`` (written beside,
  then renamed into place whole). A staged batch of the master's latest seq is applied to a
  mirror without a commit of it (the mirror's MERGE skips changes at or below a row's
  ``__pos``: applying a batch twice changes nothing); a staged batch of any other seq is
  dropped, its batch not committed and redone;
- each auxiliary table is restored to its newest commit with a ``seq`` not above the master's,
  and dropped if it has none.

A crash between any two commits thus leaves every table at the end of the last committed batch,
which is redone from the master's positions. A restore commit carries the metadata of the
version it restores, so the ledger reads the same after it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from projections.sql.syntax import SPARK
from replay.sinks.delta_log import latest_version, read_ledger
from replay.sinks.delta_sink import USER_METADATA
from replay.sinks.sql_projection import MirrorSql
from replay.spark import DataFrame, quoted_name, session_confs

if TYPE_CHECKING:
    from replay.sinks.delta_projection import DeltaProjectionStore

STAGED_DIR = "staged"
_STAGED = "__projection_staged"


def recover(
    store: DeltaProjectionStore, master: str, auxiliary: Sequence[str], mirror: MirrorSql | None
) -> None:
    """Rewind the tables of a projection version (``master`` and ``auxiliary``, among them the
    source ``mirror`` if given) to its last committed batch (module doc)."""
    root = store.root
    entries = read_ledger(master, root / master, latest_only=True)
    if not entries:
        for table in (master, *auxiliary):
            shutil.rmtree(root / table, ignore_errors=True)
            unstage(store.registry, table)
        return
    latest = entries[0]
    if (latest_version(root / master) or 0) > latest.entry.version:
        _restore(store, master, latest.entry.version, latest.metadata)
    if mirror is not None:
        _bring_forward(store, mirror, latest.seq, latest.metadata)
    for table in auxiliary:
        # read back from the newest commit: not every commit of a log a follower grows
        kept = read_ledger(table, root / table, latest_only=True, seq_at_most=latest.seq)
        if not kept:
            shutil.rmtree(root / table, ignore_errors=True)
        elif (latest_version(root / table) or 0) > kept[-1].entry.version:
            _restore(store, table, kept[-1].entry.version, kept[-1].metadata)


def _bring_forward(store: DeltaProjectionStore, mirror: MirrorSql, seq: int, meta: str) -> None:
    found = staged(store.registry, mirror.table)
    if found is None:
        return
    kept = read_ledger(mirror.table, store.root / mirror.table, latest_only=True)
    if found[0] == seq and kept and kept[0].seq < seq:
        store.spark.read.parquet(str(found[1])).createOrReplaceTempView(_STAGED)
        with session_confs(store.spark, {USER_METADATA: meta}):
            store.write(mirror.merge_sql(_STAGED, SPARK), [mirror.table])
    unstage(store.registry, mirror.table)


def _restore(store: DeltaProjectionStore, table: str, version: int, metadata: str) -> None:
    with session_confs(store.spark, {USER_METADATA: metadata}):
        store.sql(f"RESTORE TABLE {quoted_name(table)} TO VERSION AS OF {version}", [table])


def _folder(registry: Path, table: str) -> Path:
    return registry / STAGED_DIR / table


def stage(registry: Path, table: str, seq: int, rows: DataFrame) -> None:
    """Stage ``rows`` (the MERGE source of ``table``'s write in batch ``seq``), replacing what was
    staged for the table: in place whole or not at all."""
    folder = _folder(registry, table)
    shutil.rmtree(folder, ignore_errors=True)
    written = folder / f".{seq}.tmp"
    rows.write.mode("overwrite").parquet(str(written))
    os.replace(written, folder / str(seq))


def staged(registry: Path, table: str) -> tuple[int, Path] | None:
    """The seq and folder of the batch staged for ``table``, None if there is none."""
    folder = _folder(registry, table)
    seqs = [int(p.name) for p in folder.iterdir() if p.name.isdigit()] if folder.is_dir() else []
    return (max(seqs), folder / str(max(seqs))) if seqs else None


def unstage(registry: Path, table: str) -> None:
    """Drop what was staged for ``table`` (its batch committed, or is to be redone)."""
    shutil.rmtree(_folder(registry, table), ignore_errors=True)
