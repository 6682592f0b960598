"""Declared state tables as Debezium table specs: Python column types to Connect types."""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal

from cdc.events.columns import Column, ColumnKind, TableSpec
from cdc.state.table import StateTable

_KINDS: dict[type, ColumnKind] = {
    int: ColumnKind.INT64,
    float: ColumnKind.FLOAT64,
    str: ColumnKind.STRING,
    bool: ColumnKind.BOOLEAN,
    bytes: ColumnKind.BYTES,
    date: ColumnKind.DATE,
    datetime: ColumnKind.TIMESTAMP_TZ,
    dict: ColumnKind.JSON,
    list: ColumnKind.JSON,
}


def table_spec(server: str, table: StateTable) -> TableSpec:
    """The Debezium shape of ``table``: schema names ``<server>.<table>.Envelope`` etc.

    ``Decimal`` columns take their scale from ``table.scales`` (Connect's ``Decimal`` logical
    type has a fixed scale); ``datetime`` columns are zoned timestamps (aware values).
    """
    columns = []
    for name, kind in table.columns.items():
        if kind is Decimal:
            scale = table.scales.get(name)
            if scale is None:
                raise ValueError(
                    f"state table {table.name}: Decimal column {name!r} needs a scale "
                    f"(StateTable(..., scales={{{name!r}: 2}}))"
                )
            columns.append(
                Column(name=name, type=ColumnKind.DECIMAL, optional=name not in table.key,
                       scale=scale)
            )  # fmt: skip
        else:
            columns.append(Column(name=name, type=_KINDS[kind], optional=name not in table.key))
    return TableSpec(server=server, table=table.name, columns=tuple(columns), key=table.key)
