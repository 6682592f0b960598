"""Kafka's default partitioner: murmur2 test vectors of Kafka and librdkafka."""

from __future__ import annotations

import pytest

from cdc.streams.partitioner import murmur2, partition_for, to_positive

# org.apache.kafka.common.utils.UtilsTest#testMurmur2
KAFKA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}

# librdkafka src/rdmurmur2.c unittest_murmur2 (checked there against the Java client)
LIBRDKAFKA_VECTORS = {
    b"kafka": 0xD067CF64,
    b"giberish123456789": 0x8F552B0C,
    b"1234": 0x9FC97B14,
    b"234": 0xE7C009CA,
    b"34": 0x873930DA,
    b"4": 0x5A4B5CA1,
    b"PreAmbleWillBeRemoved,ThePrePartThatIs": 0x78424F1C,
    b"reAmbleWillBeRemoved,ThePrePartThatIs": 0x4A62B377,
    b"eAmbleWillBeRemoved,ThePrePartThatIs": 0xE0E4E09E,
    b"AmbleWillBeRemoved,ThePrePartThatIs": 0x62B8B43F,
    b"": 0x106E08D9,
}


@pytest.mark.parametrize(("key", "expected"), KAFKA_VECTORS.items())
def test_murmur2_matches_kafka(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected


@pytest.mark.parametrize(("key", "expected"), LIBRDKAFKA_VECTORS.items())
def test_murmur2_matches_librdkafka(key: bytes, expected: int) -> None:
    assert murmur2(key) & 0xFFFFFFFF == expected


def test_partition_is_the_positive_hash_modulo_the_partition_count() -> None:
    assert to_positive(-973932308) == -973932308 & 0x7FFFFFFF == 1173551340
    assert partition_for(b"21", 1) == 0
    assert partition_for(b"21", 7) == 1173551340 % 7
    assert partition_for(b"abc", 10) == 479470107 % 10
    assert [partition_for(k, 3) for k in KAFKA_VECTORS] == [
        to_positive(v) % 3 for v in KAFKA_VECTORS.values()
    ]
    with pytest.raises(ValueError):
        partition_for(b"k", 0)
