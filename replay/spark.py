"""The one SparkSession factory, and the only module that imports pyspark.

Local mode by default (``local[*]``), any master by argument or ``$REPLICATOR_SPARK_MASTER``. The
Kafka source and Delta jars come from :mod:`cdc.runtime.jars` (resolved from Maven Central ahead of
time), so starting Spark downloads nothing. Other modules take Spark's API from here:
``from replay.spark import F, T, DataFrame, SparkSession``; ``collect_arrow`` brings a frame to
the driver as Arrow, streamed (``replay.driver_frames`` goes the other way). Spark's Python
worker daemon (``replay.worker_daemon``) serves through ``serve_python_workers``.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import re
import sys
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import pyspark
import pyspark.sql.functions as F
import pyspark.sql.types as T
from py4j.protocol import Py4JJavaError  # type: ignore[import-untyped]
from pyspark import SparkContext
from pyspark.accumulators import Accumulator, AccumulatorParam
from pyspark.errors import PySparkException
from pyspark.errors.exceptions.captured import unwrap_spark_exception
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql.conversion import LocalDataToArrowConversion
from pyspark.sql.pandas.serializers import ArrowCollectSerializer
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.util import _create_local_socket

from cdc.runtime import class_archive as archives
from cdc.runtime import jars
from replay import class_archive, driver_jit, jvm_options

__all__ = [
    "Accumulator", "AccumulatorParam", "Column", "DataFrame", "F", "LocalDataToArrowConversion",
    "Py4JJavaError", "PySparkException", "SparkContext", "SparkSession", "T", "Window",
    "collect_arrow", "driver_heap_bytes", "named_column", "quoted_name", "session_confs",
    "spark_session", "to_arrow_schema",
]  # fmt: skip

_SECRET_OPTIONS = r"(?i)url|password|jaas|ssl\.keystore\.key|ssl\.truststore\.certificates"
DELTA_CHECKPOINT_INTERVAL = 100
"""Commits between two checkpoints of a Delta table this session creates (Delta's default: 10):
a checkpoint added ~1 s to every tenth ``--follow`` round; replaying up to 100 small commits
costs a round nothing measurable (``bench/README.md``). Existing tables keep their own."""
HOTSPOT_HUGE_METHOD_BYTES = 8000
"""HotSpot's ``HugeMethodLimit``: whole-stage code with a larger method runs per operator."""
CODEGEN_CACHE_ENTRIES = 1000
"""Generated classes a session keeps compiled (Spark's default: 100)."""
DELTA_CHECKPOINT_INTERVAL_DEFAULT = "spark.databricks.delta.properties.defaults.checkpointInterval"


def spark_jars() -> list[Path]:
    """The Kafka-source and Delta jars, minus artifacts the pyspark wheel already ships."""
    shipped = jars.artifact_names(Path(pyspark.__file__).parent / "jars")
    return jars.resolve("spark-extras", extra_exclusions=shipped)


def _shipped_jars() -> list[Path]:
    """The jars of the pyspark wheel: the driver's classpath."""
    return sorted((Path(pyspark.__file__).parent / "jars").glob("*.jar"))


def driver_classpath_first() -> list[Path]:
    """Jars put before the driver's classpath: unsigned copies of the signed jars pyspark ships
    (``cdc.runtime.class_archive.unsigned_copies``), whose classes an archive can then hold."""
    return archives.unsigned_copies(_shipped_jars())


def driver_class_archive(first: Sequence[Path] | None = None) -> Path:
    """The driver's class archive for this ``java`` and jars (:mod:`replay.class_archive`);
    ``first``: the ``driver_classpath_first`` jars, if known."""
    shipped = _shipped_jars()
    first = archives.unsigned_copies(shipped) if first is None else first
    return class_archive.archive_path(jars.java_executable(), [*first, *shipped, *spark_jars()])


def spark_session(
    master: str | None = None,
    *,
    app_name: str = "replicator",
    conf: Mapping[str, str] | None = None,
    one_shot_records: int | None = None,
) -> SparkSession:
    """Get or create the process's SparkSession with the Kafka source and Delta configured;
    ``one_shot_records``: the records a session that replays once and exits will read at most
    (its driver's JIT is chosen for it: :mod:`replay.driver_jit`)."""
    first = driver_classpath_first()
    archive = driver_class_archive(first)
    chosen = master or os.environ.get("REPLICATOR_SPARK_MASTER", "local[*]")
    if chosen.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # loopback only, no host lookup
        # Python workers default to `python3` from PATH, which lacks this package (and imports
        # it only by luck of the working directory): use the driver's interpreter.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    java = jvm_options.java_options()
    builder = (
        SparkSession.builder.master(chosen)
        .appName(app_name)
        .config("spark.jars", ",".join(str(j) for j in spark_jars()))
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config(
            "spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog"
        )
        .config(
            "spark.driver.extraJavaOptions",
            jvm_options.driver_options(archive, java, one_shot_records=one_shot_records),
        )
        .config("spark.executor.extraJavaOptions", java)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config(
            "spark.sql.shuffle.partitions", os.environ.get("REPLICATOR_SHUFFLE_PARTITIONS", "8")
        )
        .config("spark.driver.memory", os.environ.get("REPLICATOR_DRIVER_MEMORY", "4g"))
        .config("spark.databricks.delta.snapshotPartitions", "2")
        .config(DELTA_CHECKPOINT_INTERVAL_DEFAULT, str(DELTA_CHECKPOINT_INTERVAL))
        .config("spark.sql.warehouse.dir", str(jars.cache_dir() / "spark-warehouse"))
        .config("spark.sql.debug.maxToStringFields", "1000")
        # No Python call site per Column call (error context): ~half a rebuild's py4j calls.
        .config("spark.python.sql.dataFrameDebugging.enabled", "false")
        # HotSpot never compiles a method over 8,000 bytes of bytecode: the decoder's fused
        # stage has such methods and ran interpreted (~30% of a rebuild's decode, bench/README).
        .config("spark.sql.codegen.hugeMethodLimit", str(HOTSPOT_HUGE_METHOD_BYTES))
        # A projection round into Delta uses more generated classes than the 100 the default
        # cache holds (Delta's own queries with ours): each round compiled ~50 of them again and
        # the JIT started over on them (its rounds 16-29% longer at 1 k/s, bench/README).
        .config("spark.sql.codegen.cache.maxEntries", str(CODEGEN_CACHE_ENTRIES))
        # Kafka source options may hold a login or a client key: never printed in plans.
        .config("spark.sql.redaction.options.regex", _SECRET_OPTIONS)
    )
    if chosen.startswith("local"):  # a cluster's workers may not have this package installed
        builder = builder.config("spark.python.daemon.module", "replay.worker_daemon")
    if first:  # the archive was made with them first
        builder = builder.config("spark.driver.extraClassPath", os.pathsep.join(map(str, first)))
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    driver_jit.keep_c2_off_warm_up_code(session.sparkContext)
    if chosen.startswith("local"):
        start_python_workers(session)
    return session


# What a rebuild's first Python tasks (its compaction) import, besides pyspark.
WORKER_MODULES = ("replay.decode.compacted_read", "cdc.streams.registry")
_warmed: set[str] = set()


def start_python_workers(spark: SparkSession, modules: Sequence[str] = WORKER_MODULES) -> None:
    """Start the session's Python workers (one per core, importing ``modules``) in a job of a
    background thread, once per Spark application: their start (~1 s on two cores) overlaps the
    driver's planning of the first job that runs Python instead of following it."""
    context = spark.sparkContext
    if context.applicationId in _warmed:
        return
    _warmed.add(context.applicationId)
    cores = context.defaultParallelism

    def warm() -> None:
        try:
            context.setLocalProperty("spark.job.description", "start the Python workers")
            work = partial(_import_modules, tuple(modules))
            context.parallelize(range(cores), cores).foreachPartition(work)
        except Exception as error:  # only a head start: the first real job starts them anyway
            logging.getLogger(__name__).debug("no head start for Python workers: %s", error)

    threading.Thread(target=warm, name="start-python-workers", daemon=True).start()


def _import_modules(modules: tuple[str, ...], _rows: Iterable[Any]) -> None:
    for module in modules:
        importlib.import_module(module)


def driver_heap_bytes(spark: SparkSession) -> int:
    """The most heap the driver's JVM may use (``Runtime.maxMemory``): what bounds a broadcast,
    which the driver collects and hashes before shipping it."""
    runtime = spark.sparkContext._jvm.java.lang.Runtime.getRuntime()  # type: ignore[union-attr]
    return int(runtime.maxMemory())


def collect_arrow(frame: DataFrame, keep_going: Callable[[int], bool]) -> Any:
    """``frame.toArrow()`` (one job), its batches read as the tasks finish; None, and the job
    cancelled, as soon as ``keep_going`` (given the bytes read so far) returns False (the job
    is over when this returns, or raises)."""
    import pyarrow as pa  # type: ignore[import-untyped]

    schema = to_arrow_schema(frame.schema, error_on_duplicated_field_names_in_struct=True,
        prefers_large_types=frame.sparkSession._jconf.arrowUseLargeVarTypes())  # fmt: skip
    context, tag = frame.sparkSession.sparkContext, f"replicator-arrow-{uuid.uuid4()}"
    context.addJobTag(tag)
    try:
        port, secret, server = frame._jdf.collectAsArrowToPython()
    finally:
        context.removeJobTag(tag)
    batches: list[Any] = []
    cancelled, read = False, 0
    socket = _create_local_socket((port, secret))
    try:  # the stream ends with the batches' order, a list
        for batch in ArrowCollectSerializer().load_stream(socket):  # type: ignore[no-untyped-call]
            if not isinstance(batch, pa.RecordBatch):
                batches = [batches[i] for i in batch]  # in the frame's order, as ``toArrow``
            elif not keep_going(read := read + batch.nbytes):
                cancelled = True
                break
            else:
                batches.append(batch)
    except Exception:  # a failed job's (its own error comes from getResult), or ours
        context.cancelJobsWithTag(tag)
        raise
    except BaseException:  # an interrupt goes on, not the cancelled job's error
        cancelled = True
        raise
    finally:
        if cancelled:
            context.cancelJobsWithTag(tag)
        socket.close()
        with unwrap_spark_exception(), contextlib.suppress(*([Exception] if cancelled else [])):
            server.getResult()  # waits for the job's end; raises its error
    if cancelled:
        return None
    return pa.Table.from_batches(batches).cast(schema) if batches else schema.empty_table()


_SESSION_CONFS = threading.RLock()  # a command may build a frame that sets its own


@contextmanager
def session_confs(spark: SparkSession, confs: Mapping[str, str]) -> Iterator[None]:
    """Set session confs for one command, then restore them (the session is shared)."""
    with _SESSION_CONFS:
        saved = {key: spark.conf.get(key, None) for key in confs}
        for key, value in confs.items():
            spark.conf.set(key, value)
        try:
            yield
        finally:
            for key, old in saved.items():
                if old is None:
                    spark.conf.unset(key)
                else:
                    spark.conf.set(key, old)


def quoted_name(name: str) -> str:
    """``name`` as a SQL identifier in backticks (a name may hold dots, spaces or backticks)."""
    return "`" + name.replace("`", "``") + "`"


def named_column(name: str) -> Column:
    """The column called ``name``, quoted (a name may hold dots, spaces or backticks)."""
    return F.col(quoted_name(name))


_SPARK_ARCHIVES = re.compile(
    r"(?:^|[/\\])(?:pyspark\.zip|py4j-[\w.-]+-src\.zip|spark-core_[\w.-]+\.jar)$"
)


def serve_python_workers() -> None:
    """PySpark's Python worker daemon (``replay.worker_daemon``, local mode), with Spark's own
    archives read once per worker instead of once per task.

    Spark puts ``pyspark.zip``, py4j's zip and the spark-core jar on its workers' path, and
    before every task calls ``importlib.invalidate_caches``, for which each ``zipimporter`` of
    these archives (one per package imported from them) reads its whole directory again on
    Python 3.10-3.12 (3.13 re-reads lazily): ~40 ms of every Python task, more than the rest of
    a small task's overhead. These archives do not change while the application runs; other
    archives (``addPyFile``) are invalidated as before (here: it imports pyspark).
    """
    import zipimport

    from pyspark.daemon import manager

    invalidate = zipimport.zipimporter.invalidate_caches

    def invalidate_others(importer: zipimport.zipimporter) -> None:
        if not _SPARK_ARCHIVES.search(importer.archive):
            invalidate(importer)

    zipimport.zipimporter.invalidate_caches = invalidate_others  # type: ignore[method-assign,assignment]
    manager()  # type: ignore[no-untyped-call]
