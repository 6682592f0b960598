"""Clear one-line errors from the runtime: no Java, Maven failure, broker port in use."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from cdc.errors import SetupError
from cdc.runtime import jars
from cdc.runtime.broker import LocalKafkaBroker


def test_missing_java_names_the_fix(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SetupError, match=r"Java not found on PATH: install a JDK 17\+"):
        jars.java_executable()


def test_maven_failure_names_the_component_and_log(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    jvm = tmp_path / "jvm"
    (jvm / "kafka-broker").mkdir(parents=True)
    (jvm / "settings.xml").write_text((jars.JVM_DIR / "settings.xml").read_text())
    pom = (jars.JVM_DIR / "kafka-broker" / "pom.xml").read_text()
    (jvm / "kafka-broker" / "pom.xml").write_text(
        pom.replace(
            "<kafka.version>4.1.1</kafka.version>", "<kafka.version>0.0.0-nope</kafka.version>"
        )
    )
    monkeypatch.setattr(jars, "JVM_DIR", jvm)
    monkeypatch.setenv("REPLICATOR_CACHE", str(tmp_path / "cache"))
    with pytest.raises(SetupError) as err:
        jars.resolve("kafka-broker")
    message = str(err.value)
    assert "Maven could not resolve kafka-broker from Maven Central" in message
    assert "0.0.0-nope" in message and "full log:" in message
    assert "\n" not in message


def test_second_resolution_is_a_no_op(monkeypatch: pytest.MonkeyPatch) -> None:
    first = jars.resolve("kafka-broker")
    monkeypatch.setenv("PATH", "/nonexistent")  # neither mvn nor java reachable now
    assert jars.resolve("kafka-broker") == first


def test_broker_port_in_use_is_a_one_line_error(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        with pytest.raises(SetupError, match=rf"^port {port} on 127.0.0.1 is already in use"):
            LocalKafkaBroker(tmp_path, port=port).start()


def test_a_cache_file_is_written_whole_and_only_when_its_text_changes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("REPLICATOR_CACHE", str(tmp_path / "cache"))
    path = jars.cache_file("jvm/directives.json", "[1]")
    assert path == tmp_path / "cache" / "jvm" / "directives.json" and path.read_text() == "[1]"
    stamp = path.stat().st_mtime_ns
    assert jars.cache_file("jvm/directives.json", "[1]") == path
    assert path.stat().st_mtime_ns == stamp  # the same text is not written again
    assert jars.cache_file("jvm/directives.json", "[2]").read_text() == "[2]"
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary left
