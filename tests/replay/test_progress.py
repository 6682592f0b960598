"""Replay progress reports: remaining offsets and lag per partition, rate and ETA."""

from __future__ import annotations

from replay.progress import PartitionProgress, ReplayProgress, progress_of


def test_progress_of_counts_offsets_per_partition() -> None:
    report = progress_of(
        "t", started=0.0, plan_start={0: 10, 1: 0}, current={0: 60, 1: 0},
        stops={0: 110, 1: 50}, log_ends={0: 120, 1: 50},
    )  # fmt: skip
    assert (report.done, report.total) == (50, 150)
    assert report.partitions[0] == PartitionProgress(60, 110, 120)
    assert (report.partitions[0].remaining, report.partitions[0].lag) == (50, 60)
    assert (report.partitions[1].remaining, report.partitions[1].lag) == (50, 50)


def test_rate_eta_and_lag_text() -> None:
    parts = {n: PartitionProgress(0, 10 * (n + 1), 10 * (n + 1)) for n in range(6)}
    report = ReplayProgress("t", done=100, total=300, partitions=parts, seconds=2.0)
    assert report.rate == 50 and report.eta_seconds == 4.0
    assert report.lag_text(limit=2) == "p5 lag 60, p4 lag 50, +4 more"
    assert ReplayProgress("t", 0, 10, parts, 0.0).eta_seconds is None
    done = {0: PartitionProgress(10, 10, 12)}
    assert ReplayProgress("t", 10, 10, done, 1.0).lag_text() == "caught up"
