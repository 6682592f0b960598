"""The Python XXH64 the driver's schema scan uses gives what Spark's ``xxhash64`` gives."""

from __future__ import annotations

import random
import string
from typing import Any

import pytest

from replay.decode.xxhash64 import xxhash64
from replay.spark import F

pytestmark = pytest.mark.integration


def test_xxhash64_in_python_equals_sparks(spark: Any) -> None:
    rnd = random.Random(7)
    alphabet = string.printable + "éß€漢"
    texts = ["", "a", "é", "ab€d", "x" * 5000] + [
        "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 200))) for _ in range(200)
    ]  # every tail length (0-31 bytes after the 32-byte stripes), multi-byte characters
    frame = spark.createDataFrame([(t,) for t in texts], "t string")
    sparks = [row[0] for row in frame.select(F.xxhash64("t")).collect()]
    assert [xxhash64(t.encode()) for t in texts] == sparks
