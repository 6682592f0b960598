"""``verify``: do two tables hold the same rows? Row counts, an order-independent checksum, and
the first keys whose rows differ."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from replay.spark import DataFrame, F

_HASH = "__row_hash"


@dataclass
class VerifyReport:
    left_rows: int
    right_rows: int
    left_checksum: str
    right_checksum: str
    differing_keys: list[dict[str, Any]] = field(default_factory=list)

    @property
    def equal(self) -> bool:
        return (
            self.left_rows == self.right_rows
            and self.left_checksum == self.right_checksum
            and not self.differing_keys
        )

    def render(self) -> str:
        verdict = "EQUAL" if self.equal else "DIFFERENT"
        lines = [
            f"{verdict}: rows {self.left_rows} vs {self.right_rows}, "
            f"checksum {self.left_checksum} vs {self.right_checksum}"
        ]
        lines += [f"  differs at key {k}" for k in self.differing_keys]
        return "\n".join(lines)


def _hashed(df: DataFrame, columns: Sequence[str]) -> DataFrame:
    # Each row hashes its values in a fixed column order, as text, so DuckDB and Delta types
    # that Spark reads slightly differently (e.g. decimal precision) compare by value.
    values = [F.coalesce(F.col(c).cast("string"), F.lit("\x00NULL")) for c in columns]
    return df.withColumn(_HASH, F.xxhash64(*values))


def verify_tables(
    left: DataFrame, right: DataFrame, key: Sequence[str], *, max_keys: int = 10
) -> VerifyReport:
    """Compare ``left`` and ``right`` (same column names; ``key`` identifies a row)."""
    columns = sorted(left.columns)
    missing = set(columns) ^ set(right.columns)
    if missing:
        raise ValueError(f"the tables do not have the same columns: {sorted(missing)} differ")
    a, b = _hashed(left, columns), _hashed(right, columns)

    def summary(df: DataFrame) -> tuple[int, str]:
        row = df.agg(
            F.count("*").alias("n"),
            F.coalesce(F.sum(F.col(_HASH).cast("decimal(38,0)")), F.lit(0)).alias("s"),
        ).collect()[0]
        return int(row["n"]), format(int(row["s"]) % (1 << 64), "016x")

    left_rows, left_sum = summary(a)
    right_rows, right_sum = summary(b)
    report = VerifyReport(left_rows, right_rows, left_sum, right_sum)
    if report.left_checksum != report.right_checksum or left_rows != right_rows:
        joined = a.select(*key, F.col(_HASH).alias("l")).join(
            b.select(*key, F.col(_HASH).alias("r")), list(key), "full_outer"
        )
        diff = joined.where(~F.col("l").eqNullSafe(F.col("r"))).select(*key).orderBy(*key)
        report.differing_keys = [r.asDict() for r in diff.limit(max_keys).collect()]
    return report
