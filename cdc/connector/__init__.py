"""The event source connector: captures every committed state-table write as a Debezium
change event on the table's compacted changelog topic, with BEGIN/END transaction metadata."""

from cdc.connector.changelog import ChangelogConnector, InputOrigin, OutRecord
from cdc.connector.spec import table_spec

__all__ = ["ChangelogConnector", "InputOrigin", "OutRecord", "table_spec"]
