"""A first rebuild in one Spark job, on the guess that its topic holds nothing unusual.

``compacted_read.persisted_decode`` decodes a rebuild's survivors into Spark's cache in one job
whose tasks tell the ``Survey`` that plans the rest (``task_survey``); the write's own job then
reads the cache. Building that cache is most of what a cold first job costs beyond the decode
(``bench/README.md``). Where the sink runs a replace's job before it writes anything
(``Sink.stages_rows``: DuckDB), ``CleanGuess`` plans the table on the survey of a clean topic
(``CLEAN``: no truncate candidate, no record that may be bad, no live image lacking a value, no
primary key in two rows). The sink's one job then decodes and stages the rows, and the survey
its tasks tell confirms the guess (``holds``) before anything is written. Where the guess fails,
or the rows would not fit in memory (``projected``), nothing is written and the rebuild goes the
cached way (``replaced_on_guess``): a topic with a bad record or a truncate is decoded twice.
"""

from __future__ import annotations

import logging
from typing import NamedTuple

from replay.decode.compacted_read import decoded_survivors, decodes_in_tasks, is_over_budget
from replay.decode.compaction import Survey, rebuild_table
from replay.decode.schema import TopicSchema
from replay.decode.task_survey import survey_taken
from replay.reading.plan import ReplayPlan
from replay.sinks.protocol import POS, GuessFailedError, LedgerEntry, Sink, TableSpec
from replay.spark import SparkSession

CLEAN = Survey(candidates=False, rejected=False, lacking=False, repeated=False)
"""The survey of a topic whose rebuilt table is its survivors' live images, as they are."""
RESULTS_BOUND = "spark.driver.maxResultSize"
"""Named by the error of a job whose tasks' results (one range's rows, as Arrow) passed it."""
_log = logging.getLogger(__name__)


class CleanGuess:
    """A rebuild's table (``rows``) planned on ``CLEAN``; a ``sinks.protocol.Guess`` told by
    the tasks of the rows' own job (``task_survey``)."""

    def __init__(
        self, spark: SparkSession, stream_url: str, plan: ReplayPlan, schema: TopicSchema
    ) -> None:
        decoded, self._findings = decoded_survivors(spark, stream_url, plan, schema)
        columns = [c.name for c in schema.columns]
        self.rows = rebuild_table(decoded, schema, CLEAN).rows().select(*columns, POS)
        self._spans = {(r.tp.topic, r.tp.partition, r.start): r.span for r in plan.ranges}
        self.found: Survey | None = None
        """The tasks' survey, once ``holds`` was asked."""

    def projected(self, staged_bytes: int) -> int:
        """``staged_bytes`` scaled from the records of the ranges told so far to all."""
        told = sum(self._spans.get(key, 0) for key in list(self._findings.value))
        return staged_bytes if told == 0 else staged_bytes * sum(self._spans.values()) // told

    def holds(self) -> bool:
        """Whether the finished job's survey is ``CLEAN`` (its ``live`` and sizes aside)."""
        found = self.found = survey_taken(self._findings)
        return not (found.candidates or found.rejected or found.lacking or found.repeated)

    def drop(self) -> None:
        """Forget what the tasks told (the session keeps the accumulator)."""
        self._findings.value = {}


class Guessed(NamedTuple):
    """What ``replaced_on_guess`` did: ``done`` (``entry``: what ``replace`` returned), or not
    (nothing written: rebuild the cached way)."""

    done: bool
    entry: LedgerEntry | None = None


def replaced_on_guess(
    spark: SparkSession, sink: Sink, stream_url: str, spec: TableSpec, schema: TopicSchema,
    plan: ReplayPlan,
) -> Guessed:  # fmt: skip
    """``sink.replace`` of the table on a ``CleanGuess``, where the sink stages its rows and the
    compaction tasks decode; not done where it wrote nothing (the guess failed, a compaction
    task went over its budget, or one range's rows passed ``RESULTS_BOUND``)."""
    if not sink.stages_rows or not decodes_in_tasks(schema):
        return Guessed(False)
    guess = CleanGuess(spark, stream_url, plan, schema)
    try:
        positions = plan.stop_positions
        return Guessed(True, sink.replace(spec, guess.rows, positions, guess=guess))
    except GuessFailedError as failed:
        _log.info("%s; rebuilding %s the cached way", failed, spec.name)
    except Exception as error:  # a Spark job's error names its cause only in its text
        if not is_over_budget(error) and RESULTS_BOUND not in str(error):
            raise
        _log.info("%s; rebuilding %s the cached way", str(error).splitlines()[0], spec.name)
    finally:
        guess.drop()
    return Guessed(False)
