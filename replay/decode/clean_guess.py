"""A first rebuild in one Spark job, on the guess that its topic holds nothing unusual.

``compacted_read.persisted_decode`` decodes a rebuild's survivors into Spark's cache in one job
whose tasks tell the ``Survey`` that plans the rest (``task_survey``); the write's own job then
reads the cache. Building that cache is most of what a cold first job costs beyond the decode
(``bench/README.md``). Where the sink can hold a replace's rows in memory before it writes
(``Sink.guess_bytes``: DuckDB, Delta), ``CleanGuess`` plans the table on the survey of a clean
topic (``CLEAN``: no truncate candidate, no record that may be bad, no live image lacking a
value, no primary key in two rows). The sink's one job then decodes and collects the rows,
and the survey its tasks tell confirms the guess (``holds``) before anything is written; the
sink stops the job as soon as the finished tasks tell it wrong (``failed``) or the rows will not
fit in memory (``projected``). Then nothing is written and the rebuild goes the cached way
(``replaced_on_guess``): a topic with a bad record or a truncate is decoded about twice. In local
mode the tasks hand the rows over in files (``handed_rows``), without a frame.
"""

from __future__ import annotations

import logging
from typing import NamedTuple

from replay.decode.compacted_read import (
    decoded_survivors,
    decodes_in_tasks,
    is_over_budget,
    marked_line,
    over_budget_line,
)  # fmt: skip
from replay.decode.compaction import Survey, is_live
from replay.decode.handed_rows import (
    NOT_HANDED_OVER,
    TaskFileRows,
    in_local_files,
    is_not_handed_over,
)  # fmt: skip
from replay.decode.key_tally import RangeId, per_range_accumulator
from replay.decode.schema import TopicSchema
from replay.decode.task_survey import (
    CANDIDATES,
    LACKING,
    LIVE_BYTES,
    REJECTED,
    Findings,
    range_key,
    survey_taken,
)  # fmt: skip
from replay.reading.plan import ReplayPlan
from replay.sinks.protocol import POS, GuessFailedError, HandedRows, LedgerEntry, Sink, TableSpec
from replay.spark import DataFrame, SparkSession

CLEAN = Survey(candidates=False, rejected=False, lacking=False, repeated=False)
"""The survey of a topic whose rebuilt table is its survivors' live images, as they are."""
RESULTS_BOUND = "spark.driver.maxResultSize"
"""Named by the error of a job whose tasks' results (the rows, as Arrow) passed it."""
_log = logging.getLogger(__name__)


class CleanGuess:
    """A rebuild's table (``rows``) planned on ``CLEAN``; a ``sinks.protocol.Guess`` told by
    the tasks of the rows' own job (``task_survey``), each of which stops shipping rows once
    its live rows pass ``live_bytes_at_most`` (the guess then fails). The rows are handed over
    in files where the tasks share the driver's disk (``handed``: by default, in local mode),
    else a DataFrame."""

    def __init__(
        self, spark: SparkSession, stream_url: str, plan: ReplayPlan, schema: TopicSchema,
        live_bytes_at_most: int, *, handed: bool | None = None,
    ) -> None:  # fmt: skip
        self.most, self.ranges = live_bytes_at_most, plan.ranges
        self.rows: DataFrame | HandedRows
        if in_local_files(spark) if handed is None else handed:
            self._findings = per_range_accumulator(spark)
            self.rows = TaskFileRows(spark, stream_url, plan, schema, self._findings, self.most)
        else:
            # A row unsure of its position fails the guess (``rejected``): no JVM positions.
            decoded, self._findings = decoded_survivors(
                spark, stream_url, plan, schema, self.most, jvm_positions=False
            )
            columns = [c.name for c in schema.columns]
            # ``rebuild_table(decoded, schema, CLEAN).rows()`` where the guess holds: no
            # candidate and no bad record among them, each key in one row; in one step.
            self.rows = decoded.where(is_live()).select(*columns, POS)
        self._spans = {range_key(r): r.span for r in plan.ranges}
        self.found: Survey | None = None
        """The tasks' survey, once ``holds`` was asked."""

    def projected(self, staged_bytes: int) -> int:
        """``staged_bytes`` scaled from the records of the ranges told so far to all; at least
        the live bytes they told (a range cut short told more than the bound)."""
        told: dict[RangeId, Findings] = dict(self._findings.value)
        spans = sum(self._spans.get(key, 0) for key in told)
        scaled = staged_bytes if spans == 0 else staged_bytes * sum(self._spans.values()) // spans
        return max(scaled, sum(found[LIVE_BYTES] or 0 for found in told.values()))

    def failed(self) -> bool:
        """Whether a range told so far holds what ``CLEAN`` rules out (a key in two ranges
        shows only once all have told: ``holds``)."""
        told: list[Findings] = list(self._findings.value.values())  # (a copy: they come on)
        return any(found[CANDIDATES] or found[REJECTED] or found[LACKING] for found in told)

    def holds(self) -> bool:
        """Whether the finished job's survey is ``CLEAN`` (its ``live`` aside) within the bound."""
        found = self.found = survey_taken(self._findings, self.ranges)
        if found._replace(live=None, live_bytes=None, keys=None) != CLEAN:
            return False
        return found.live_bytes is None or found.live_bytes <= self.most

    def drop(self) -> None:
        """Forget what the tasks told (the session keeps the accumulator)."""
        self._findings.value = {}


class Guessed(NamedTuple):
    """What ``replaced_on_guess`` did: ``done`` (``entry``: what ``replace`` returned), or not
    (nothing written: rebuild the cached way; ``over_budget``: by the two Spark passes)."""

    done: bool
    entry: LedgerEntry | None = None
    over_budget: bool = False


def replaced_on_guess(
    spark: SparkSession, sink: Sink, stream_url: str, spec: TableSpec, schema: TopicSchema,
    plan: ReplayPlan,
) -> Guessed:  # fmt: skip
    """``sink.replace`` of the table on a ``CleanGuess``, where the sink stages its rows
    (``Sink.guess_bytes``) and the compaction tasks decode; not done where it wrote nothing
    (the guess failed, a compaction task went over its budget, or the job's results passed
    ``RESULTS_BOUND``)."""
    if sink.guess_bytes is None or not decodes_in_tasks(schema):
        return Guessed(False)
    guess = CleanGuess(spark, stream_url, plan, schema, sink.guess_bytes)
    try:
        positions = plan.stop_positions
        return Guessed(True, sink.replace(spec, guess.rows, positions, guess=guess))
    except GuessFailedError as failed:
        _log.info("%s; rebuilding %s the cached way", failed, spec.name)
    except Exception as error:  # a Spark job's error names its cause only in its text
        if is_over_budget(error):
            _log.warning("%s; compacting by two Spark passes instead", over_budget_line(error))
            return Guessed(False, over_budget=True)
        if is_not_handed_over(error):
            line = marked_line(error, NOT_HANDED_OVER)
            _log.info("%s; rebuilding %s the cached way", line, spec.name)
        elif RESULTS_BOUND in str(error):
            _log.info("the rows passed %s; rebuilding %s the cached way", RESULTS_BOUND, spec.name)
        else:
            raise
    finally:
        guess.drop()
    return Guessed(False)
