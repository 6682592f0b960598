"""A first rebuild's rows handed to the driver as Arrow files by the tasks that decode them,
where the tasks share the driver's disk (a local master: ``in_local_files``).

``CleanGuess`` plans a clean topic's table as the decode's live rows. On a cluster that is a
DataFrame the sink collects (``spark.collect_arrow``): each Python task's rows go to the JVM
(pickled, unpickled, made Spark rows, then Arrow) and on to the driver, and the driver plans
that frame first, on a cold JVM. In local mode ``TaskFileRows`` does in each task what the
frame's plan does (``live_range``: ``compacted_read.decode_range``'s live rows, the table's
columns and ``__pos``), writes them as an Arrow IPC stream (``spark.LocalDataToArrowConversion``,
as Spark Connect converts a client's rows: the types ``toArrow`` gives), and the driver reads
the files: no frame to plan, no row through the JVM (``bench/README.md``).

A value Arrow cannot hold as its Spark type stops the job with ``NOT_HANDED_OVER`` in its
error: ``clean_guess.replaced_on_guess`` then rebuilds the cached way, which words the error.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from itertools import islice
from typing import Any

from replay.decode.changes import DECODED_META
from replay.decode.compacted_read import decode_range, task_budget_bytes
from replay.decode.key_tally import PerRange
from replay.decode.schema import TopicSchema
from replay.decode.task_survey import LIVE_BYTES
from replay.reading.plan import PartitionRange, ReplayPlan
from replay.sinks.protocol import OP_UPSERT, POS
from replay.spark import LocalDataToArrowConversion, SparkSession, T, to_arrow_schema

BATCH_ROWS = 8192
"""Rows a task converts to Arrow at a time (its memory beyond the decode's)."""
NOT_HANDED_OVER = "rows not handed over as Arrow"
"""In the error of a job whose rows Arrow could not hold (``is_not_handed_over`` looks for it)."""
POLL_S = 0.02
"""How often the driver asks whether to go on while the job runs."""


def is_not_handed_over(error: BaseException) -> bool:
    """Whether ``error`` is a job's whose rows Arrow could not hold (``NOT_HANDED_OVER``)."""
    return NOT_HANDED_OVER in str(error)


def in_local_files(spark: SparkSession) -> bool:
    """Whether the session's tasks run on the driver's machine (a ``local`` master), where they
    can hand rows over in files."""
    return str(spark.sparkContext.master).startswith("local")


class TaskFileRows:
    """``sinks.protocol.HandedRows``: a clean rebuild's live rows (the table's columns and
    ``__pos``), handed over by the decoding tasks as Arrow files; the tasks tell ``findings``
    (``task_survey``) and stop a range past ``live_bytes_at_most``, as ``decode_range``."""

    def __init__(
        self, spark: SparkSession, stream_url: str, plan: ReplayPlan, schema: TopicSchema,
        findings: PerRange, live_bytes_at_most: int,
    ) -> None:  # fmt: skip
        self.spark, self.findings = spark, findings
        self.ranges = [r for r in plan.ranges if r.span > 0]
        self.schema = T.StructType([*schema.row_type().fields, T.StructField(POS, T.StringType())])
        self.columns: list[str] = self.schema.fieldNames()
        budget = task_budget_bytes()
        self._task = partial(live_range, stream_url, schema, budget, findings, live_bytes_at_most)

    def collect(self, keep_going: Callable[[int], bool]) -> Any | None:
        """The rows as one Arrow table; None, the job cancelled, once ``keep_going`` (given the
        live bytes the finished tasks told, then the table's) returns False."""
        import pyarrow as pa  # type: ignore[import-untyped]

        directory = tempfile.mkdtemp(prefix="replicator-rows-", dir=_local_dir(self.spark))
        try:
            written = self._run(partial(self._task, directory, self.schema), keep_going)
            if written is None or not keep_going(sum(size for _, size in written)):
                return None
            tables = [pa.ipc.open_stream(pa.memory_map(path)).read_all() for path, _ in written]
            return (
                pa.concat_tables(tables) if tables else to_arrow_schema(self.schema).empty_table()
            )
        finally:
            shutil.rmtree(directory, ignore_errors=True)

    def _run(
        self, task: Callable[[Iterable[PartitionRange]], Iterator[tuple[str, int]]],
        keep_going: Callable[[int], bool],
    ) -> list[tuple[str, int]] | None:  # fmt: skip
        """The files the job's tasks wrote, in the ranges' order; None if it was stopped."""
        context, tag = self.spark.sparkContext, f"replicator-rows-{uuid.uuid4()}"
        rdd = context.parallelize(self.ranges, max(len(self.ranges), 1)).mapPartitions(task)
        result: list[list[tuple[str, int]]] = []
        failure: list[BaseException] = []

        def run() -> None:
            context.addJobTag(tag)  # (a thread's own: the job is submitted from it)
            try:
                result.append(rdd.collect())
            except BaseException as error:  # raised in the caller's thread
                failure.append(error)
            finally:
                context.removeJobTag(tag)

        thread = threading.Thread(target=run, name="handed-rows", daemon=True)
        thread.start()
        stopped = False
        try:
            while thread.is_alive():
                thread.join(POLL_S)
                if thread.is_alive() and not keep_going(self._told_bytes()):
                    stopped = True
                    break
        finally:
            if thread.is_alive():  # stopped, or the caller interrupted: the job goes too
                context.cancelJobsWithTag(tag)
                thread.join()
        if stopped:
            return None
        if failure:
            raise failure[0]
        return result[0]

    def _told_bytes(self) -> int:
        told = list(self.findings.value.values())  # (a copy: they come on)
        return sum(found[LIVE_BYTES] or 0 for found in told)


def live_range(
    stream_url: str, schema: TopicSchema, budget: int, noted: PerRange, most: int,
    directory: str, out: T.StructType, ranges: Iterable[PartitionRange],
) -> Iterator[tuple[str, int]]:  # fmt: skip
    """In a Spark task: each range's live rows (``out``'s columns) written as an Arrow IPC
    stream in ``directory``; its path and bytes (nothing for a range without live rows)."""
    names = len(schema.columns)
    op, pos = names, names + DECODED_META.index(POS)
    tombstoned = names + len(DECODED_META) + 2  # after the error and the raw value
    for r in ranges:
        rows = decode_range(stream_url, schema, r, budget, noted, most)
        live = (
            (*row[:names], row[pos]) for row in rows if row[op] == OP_UPSERT and not row[tombstoned]
        )
        path = f"{directory}/{r.tp.topic}-{r.tp.partition}-{r.start}.arrow"
        try:
            written = _written(live, out, path)
        except _NotArrow as error:
            where = f"{r.tp.topic} partition {r.tp.partition} from offset {r.start}"
            raise RuntimeError(f"{NOT_HANDED_OVER}: {where}: {error}") from None
        if written:
            yield path, written


def _written(live: Iterator[tuple[Any, ...]], out: T.StructType, path: str) -> int:
    """Write ``live`` to ``path`` in batches; the Arrow bytes written (0: no file)."""
    import pyarrow as pa

    writer, size = None, 0
    try:
        while chunk := list(islice(live, BATCH_ROWS)):
            try:
                table = LocalDataToArrowConversion.convert(chunk, out, use_large_var_types=False)
            except Exception as error:  # a value Arrow cannot hold as its Spark type
                raise _NotArrow(f"{type(error).__name__}: {error}") from error
            if writer is None:
                writer = pa.ipc.new_stream(path, table.schema)
            writer.write_table(table)
            size += table.nbytes
    finally:
        if writer is not None:
            writer.close()
    return size


class _NotArrow(Exception):
    """A batch of rows Arrow cannot hold as their Spark types."""


def _local_dir(spark: SparkSession) -> str:
    """The first of the session's scratch directories (``spark.local.dir``)."""
    configured = spark.sparkContext.getConf().get("spark.local.dir")
    return configured.split(",")[0] if configured else tempfile.gettempdir()
