"""Kafka's default key partitioner: ``toPositive(murmur2(key)) % partitions``.

A record keyed here lands on the same partition as one produced with the same key by the Java
client (``BuiltInPartitioner.partitionForKey``) or librdkafka's ``murmur2_random`` partitioner.
"""

from __future__ import annotations

import struct

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2``: the 32-bit MurmurHash2 of ``data`` as a signed Java int."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    words = length >> 2
    if words:
        for k in struct.unpack_from(f"<{words}I", data):
            k = (k * _M) & _MASK
            k ^= k >> 24
            k = (k * _M) & _MASK
            h = ((h * _M) ^ k) & _MASK
    tail = words << 2
    rest = length & 3
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(number: int) -> int:
    """Kafka's ``Utils.toPositive``: clear the sign bit of a 32-bit int."""
    return number & 0x7FFFFFFF


def partition_for(key: bytes, partitions: int) -> int:
    """The partition Kafka's default partitioner picks for ``key`` among ``partitions``."""
    if partitions < 1:
        raise ValueError(f"partitions must be >= 1, got {partitions}")
    return to_positive(murmur2(key)) % partitions
