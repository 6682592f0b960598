"""The restore path: applying changes read back from the changelog onto a state store.

On start, a processor restores its store from the changelog, from the store's checkpoint to
the changelog's end: the connector decodes each batch of changelog records into captured
changes and ``apply_changelog_batch`` applies them with the position after the batch.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from cdc.errors import ChangeEventError
from cdc.state.changes import CapturedChange, ChangeKind
from cdc.state.overlay import WriteLayer
from cdc.state.protocol import StateStore
from cdc.state.table import StateTable
from cdc.streams.protocol import TopicPartition


def changelog_layer(
    tables: Mapping[str, StateTable], changes: Iterable[CapturedChange]
) -> WriteLayer:
    """The encoded writes of ``changes`` in order: after images (create, update, read) are
    put, deletes delete their key and truncates clear the table."""
    layer = WriteLayer()
    for change in changes:
        table = tables.get(change.table)
        if table is None:
            raise ChangeEventError(f"unknown state table {change.table!r}", field="table")
        if change.kind is ChangeKind.TRUNCATE:
            layer.truncate(table.name)
        elif change.kind is ChangeKind.DELETE:
            key = change.key or change.before
            if not key:
                raise ChangeEventError("a delete needs a key or a before image", field="key")
            layer.put(table.name, table.encode_key(key), None)
        elif change.after is None:
            raise ChangeEventError(f"a {change.kind.value} needs an after image", field="after")
        else:
            layer.put(table.name, *table.encode_row(change.after))
    return layer


def apply_changelog_batch(
    store: StateStore,
    tables: Iterable[StateTable],
    changes: Iterable[CapturedChange],
    checkpoint: Mapping[TopicPartition, int],
) -> None:
    """Apply decoded changelog ``changes`` to ``store`` and move it to ``checkpoint``, atomically.

    ``checkpoint`` is the changelog position after the batch (next offset to apply). Bad changes
    raise ``ChangeEventError`` before anything is applied.
    """
    layer = changelog_layer({t.name: t for t in tables}, changes)
    store.apply(layer.writes, checkpoint, layer.truncated_tables())
