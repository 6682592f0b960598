"""The sink extension point: tables plus an offsets ledger, written in one transaction.

Exactly-once through idempotent offset tracking: every write carries the stream positions it
brings the table to (next offset to apply, per topic-partition), and the sink stores them in the
same transaction as the data. A write whose positions the ledger already covers is skipped, so a
retried batch is never applied twice, and a crash leaves the table at the last ledger entry.

The changes handed to :meth:`Sink.merge` are a Spark DataFrame with the table's columns plus:

- ``__op``: ``"u"`` upsert (c/u/r events), ``"d"`` delete, ``"t"`` a truncate with no change after
  it in the batch (a lone row with ``__truncated`` true and null columns, since an empty DataFrame
  cannot carry the flag; sinks apply the truncate and drop the row);
- ``__pos``: the event's ordering position within its key (a string that sorts like the source
  position: stream offset, or the Debezium source position), used so that an older event never
  overwrites a newer row and a remembered delete is not resurrected by a late older event;
- ``__truncated``: True on rows of a batch that starts with a truncate of the table (the table is
  cleared, then the batch's rows applied) — the engine puts a truncate in a batch of its own.

At most one change per primary key is in a batch (the engine keeps the newest). Rows with
``__op`` ``"x"`` (null columns) mark records the engine found bad: every sink must raise
:class:`RejectedRecordsError` for a batch holding one, before writing anything (it looks in a
pass over the batch it makes anyway; a batch the ledger covers is skipped as ever), so the engine
can look for bad records in the write's own Spark job (small batches) and apply its
``--on-error`` policy only when there are some. A sink that ignored the marks would drop bad
records silently.

The rows handed to :meth:`Sink.replace` may carry ``__pos`` too (kept for later merges to compare).
A sink that can hold a replace's rows in memory before it writes anything (``guess_bytes``)
takes a ``Guess`` with them: rows planned on a guess the job itself confirms (``Guess.holds``),
a DataFrame or ``HandedRows``, whose tasks hand them to the driver as Arrow (``guessed_rows``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypedDict

from cdc.streams.protocol import TopicPartition

OP = "__op"
OP_UPSERT, OP_DELETE, OP_TRUNCATE, OP_REJECTED = "u", "d", "t", "x"
POS = "__pos"
DEAD_LETTER_TABLE = "_replicator_dead_letters"
"""The sink table of the records ``--on-error dead-letter`` set aside (``dead_letters``)."""
TRUNCATED = "__truncated"
META_COLUMNS = (OP, POS, TRUNCATED)

Positions = Mapping[TopicPartition, int]


class RejectedRecordsError(RuntimeError):
    """A merge's batch marks records as bad (``__op`` ``x``); nothing of it was written."""

    def __init__(self, table: str, count: int) -> None:
        super().__init__(f"{count} bad records in the batch for table {table}: nothing written")
        self.table, self.count = table, count


class WriteBounds(TypedDict):
    """``Sink.replace``'s bounds on its rows (None: unknown)."""

    rows_at_most: int | None
    bytes_at_most: int | None


class GuessFailedError(RuntimeError):
    """A ``replace`` given a ``Guess`` wrote nothing: it did not hold, or its rows would not
    have fitted in memory."""


class Guess(Protocol):
    """What the caller of a ``replace`` planned its rows on, told by the rows' own job."""

    def projected(self, staged_bytes: int) -> int:
        """The bytes the whole job will stage, given what it has staged so far."""
        ...

    def failed(self) -> bool:
        """While the job runs: whether its finished tasks already tell the guess wrong."""
        ...

    def holds(self) -> bool:
        """After the job: whether the rows are the table's (else nothing may be written)."""
        ...


class HandedRows(Protocol):
    """Rows of a job whose tasks hand them to the driver as Arrow, not through a DataFrame:
    ``replace``'s ``rows`` beside a ``Guess``, where the sink stages in memory."""

    @property
    def columns(self) -> list[str]:
        """Their columns' names, as a DataFrame's."""
        ...

    @property
    def schema(self) -> Any:
        """Their Spark schema, as a DataFrame's."""
        ...

    def collect(self, keep_going: Callable[[int], bool]) -> Any | None:
        """Run their job: the rows as one Arrow table of ``toArrow``'s types; None, the job
        stopped, as soon as ``keep_going`` (given the bytes staged so far) returns False."""
        ...


@dataclass(frozen=True)
class TableSpec:
    """A target table: its name and primary key; columns come from the DataFrame's schema."""

    name: str
    primary_key: tuple[str, ...]
    properties: Mapping[str, str] = field(default_factory=dict)
    defaults: Mapping[str, Any] = field(default_factory=dict)
    """Values of columns added to the source table with a default: when a merge brings a
    column the table lacks, its existing rows take this value (else NULL), as the database's
    rows did (``ADD COLUMN ... DEFAULT x`` fills them without change events)."""


@dataclass(frozen=True)
class LedgerEntry:
    """One committed write: the table version/checkpoint and the positions it reflects."""

    table: str
    version: int
    positions: dict[TopicPartition, int]
    committed_at_ms: int
    mode: str  # "replace" or "merge"


class Sink(Protocol):
    url: str
    guess_bytes: int | None
    """The most bytes of rows (as Arrow) ``replace`` holds in memory on a ``guess``; None: it
    takes no guess."""

    def positions(self, table: str) -> dict[TopicPartition, int]:
        """The positions the table reflects (empty if it does not exist)."""
        ...

    def replace(
        self, spec: TableSpec, rows: Any, positions: Positions, *, rows_at_most: int | None = None,
        bytes_at_most: int | None = None, guess: Guess | None = None,
    ) -> LedgerEntry | None:  # fmt: skip
        """Replace the table's contents with ``rows`` (a DataFrame of final images, no meta
        columns) in one bulk write, recording ``positions``; None if already at them.
        ``rows_at_most``: a bound on the frame's rows, when the caller knows one (a sink may
        then hand a small frame over in memory rather than through files); ``bytes_at_most``:
        about how much memory its values take (Arrow's layout), when the caller knows.
        ``guess`` (only where ``guess_bytes``): the rows (a DataFrame or ``HandedRows``) are
        held in memory whatever the bounds and written only if it ``holds``, else
        ``GuessFailedError``."""
        ...

    def merge(
        self, spec: TableSpec, changes: Any, positions: Positions, *,
        rows_at_most: int | None = None,
    ) -> LedgerEntry | None:  # fmt: skip
        """Apply ``changes`` (see the module doc) and record ``positions``, atomically; None if
        the ledger already covers ``positions`` (a retried batch). ``rows_at_most``: as for
        ``replace``."""
        ...

    def history(self, table: str) -> Sequence[LedgerEntry]:
        """Every committed write of the table, oldest first ("the table as of offset X")."""
        ...

    def read(self, table: str, version: int | None = None) -> Any:
        """The table (or an older version of it) as a Spark DataFrame without meta columns."""
        ...

    def tables(self) -> list[str]: ...

    def close(self) -> None: ...
