"""The foundation's integration checks on the real components: Kafka, Spark's Kafka source,
Delta time travel, DuckDB."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

pytestmark = pytest.mark.integration


def _produce(
    bootstrap: str, topic: str, partitions: int, count: int
) -> list[tuple[int, bytes, bytes]]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result()
    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random"})
    sent = []
    for i in range(count):
        key, value = f"k{i % 7}".encode(), f"v{i}".encode()
        producer.produce(topic, key=key, value=value)
        sent.append((key, value))
    assert producer.flush(30) == 0
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": topic, "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[tuple[int, bytes, bytes]] = []
    while len(got) < count:
        msg = consumer.poll(10)
        assert msg is not None, f"only {len(got)} of {count} records came back"
        assert msg.error() is None
        partition, got_key, got_value = msg.partition(), msg.key(), msg.value()
        assert partition is not None and got_key is not None and got_value is not None
        got.append((partition, got_key, got_value))
    consumer.close()
    assert sorted((k, v) for _, k, v in got) == sorted(sent)
    return got


def test_produce_and_consume_on_the_real_broker(
    kafka_bootstrap: str, unique_name: Callable[[str], str]
) -> None:
    got = _produce(kafka_bootstrap, unique_name("roundtrip"), 3, 50)
    assert {p for p, _, _ in got} == {0, 1, 2}


def test_spark_kafka_source_reads_explicit_offset_ranges(
    kafka_bootstrap: str, spark: Any, unique_name: Callable[[str], str]
) -> None:
    topic = unique_name("spark-source")
    got = _produce(kafka_bootstrap, topic, 2, 40)
    per_partition = {p: [(k, v) for q, k, v in got if q == p] for p in (0, 1)}
    # Skip the first record of partition 0 and stop before the last of partition 1.
    starting = f'{{"{topic}": {{"0": 1, "1": 0}}}}'
    ending = f'{{"{topic}": {{"0": {len(per_partition[0])}, "1": {len(per_partition[1]) - 1}}}}}'
    df = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", kafka_bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", starting)
        .option("endingOffsets", ending)
        .load()
    )
    rows = df.select("partition", "offset", "key", "value").orderBy("partition", "offset").collect()
    expected = [(0, i, *kv) for i, kv in enumerate(per_partition[0])][1:] + [
        (1, i, *kv) for i, kv in enumerate(per_partition[1])
    ][:-1]
    assert [(r.partition, r.offset, bytes(r.key), bytes(r.value)) for r in rows] == expected


def test_delta_time_travel_and_duckdb_roundtrip(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "delta-table")
    spark.createDataFrame([(1, "a"), (2, "b")], "id INT, name STRING").write.format("delta").save(
        path
    )
    spark.createDataFrame([(2, "B"), (3, "c")], "id INT, name STRING").write.format("delta").mode(
        "overwrite"
    ).save(path)
    now = sorted(tuple(r) for r in spark.read.format("delta").load(path).collect())
    then = sorted(
        tuple(r) for r in spark.read.format("delta").option("versionAsOf", 0).load(path).collect()
    )
    assert now == [(2, "B"), (3, "c")]
    assert then == [(1, "a"), (2, "b")]

    db = tmp_path / "foundation.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, name VARCHAR)")
        con.executemany("INSERT INTO t VALUES (?, ?)", now)
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT id, name FROM t ORDER BY id").fetchall() == now


def _zip_probe(directory: str) -> tuple[str, bool]:
    """Runs in a Python worker: which ``invalidate_caches`` zipimporters have, and whether an
    archive of the user's own (an ``addPyFile`` zip) still sees a module added to it."""
    import zipfile
    import zipimport

    archive = Path(directory) / "own.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("first.py", "")
    importer = zipimport.zipimporter(str(archive))
    with zipfile.ZipFile(archive, "a") as zf:
        zf.writestr("added.py", "")
    importer.invalidate_caches()
    seen = importer.find_spec("added") is not None
    return zipimport.zipimporter.invalidate_caches.__qualname__, seen


def test_python_workers_read_sparks_own_archives_once(spark: Any, tmp_path: Path) -> None:
    """The workers run ``replay.spark``'s daemon: Spark's archives are not read again before
    every task, any other archive is."""
    directories = [str(tmp_path / str(i)) for i in range(2)]
    for directory in directories:
        Path(directory).mkdir()
    found = spark.sparkContext.parallelize(directories, 2).map(_zip_probe).collect()
    assert found == [("serve_python_workers.<locals>.invalidate_others", True)] * 2


def test_column_calls_send_no_python_call_site(spark: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The session has PySpark's DataFrame debugging off: a Column call is its own calls into the
    JVM, without five more to record its Python call site (half a cold rebuild's py4j calls)."""
    from replay.spark import F

    client = spark.sparkContext._gateway._gateway_client
    commands: list[str] = []
    send = client.send_command

    def recorded(command: str, *args: Any, **kwargs: Any) -> Any:
        commands.append(command)
        return send(command, *args, **kwargs)

    monkeypatch.setattr(client, "send_command", recorded)
    column = (F.col("amount").cast("long") + F.lit(1)).alias("next")
    monkeypatch.undo()
    assert "next" in str(column) and commands
    assert not [c for c in commands if "PySparkCurrentOrigin" in c], commands
