"""The options of Spark's JVMs: log4j's configuration and the user's (``$REPLICATOR_JAVA_OPTIONS``)
for every JVM; for the driver also a small machine's JIT options (:mod:`replay.driver_jit`) and
its class archive's (:mod:`replay.class_archive`)."""

from __future__ import annotations

import os
from pathlib import Path

from cdc.runtime import jars
from replay import class_archive, driver_jit

_LOG4J2 = """\
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n%ex
logger.kafka.name = org.apache.kafka
logger.kafka.level = error
logger.native.name = org.apache.hadoop.util.NativeCodeLoader
logger.native.level = error
logger.delta.name = org.apache.spark.sql.delta
logger.delta.level = warn
logger.tasksize.name = org.apache.spark.scheduler.TaskSetManager
logger.tasksize.level = error
"""


def java_options() -> str:
    """Every Spark JVM's options: log4j's configuration (written to the jar cache), the user's."""
    log4j = jars.cache_file("spark-log4j2.properties", _LOG4J2)
    extra_java = os.environ.get("REPLICATOR_JAVA_OPTIONS", "").strip()
    return f"-Dlog4j2.configurationFile=file:{log4j} {extra_java}".rstrip()


def driver_options(archive: Path, java: str, *, one_shot_records: int | None = None) -> str:
    """The driver's: the JIT's first (for a session reading ``one_shot_records`` once, if given;
    the user's options, after them, win), ``java`` (the ``java_options``), then those that write
    or map ``archive``."""
    jit = driver_jit.driver_jit_options(one_shot_records=one_shot_records)
    return " ".join([*jit, java, *class_archive.driver_options(archive)])
