"""The replay benchmark's report: machine, versions, and the markdown tables of a result JSON.

.venv/bin/python -m bench.replay.report bench/results/replay-....json   # the tables again
"""

from __future__ import annotations

import importlib.metadata as md
import json
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

LABELS = {
    "raw-consume": "raw consume, confluent-kafka (the limit)",
    "spark-read": "Spark Kafka source, read only",
    "local-raw": "local log, read by one Python process (the local limit)",
    "local-read": "local log's Spark source, read only",
    "ours-duckdb": "**ours: ReplayEngine rebuild -> DuckDB**",
    "ours-delta": "**ours: ReplayEngine rebuild -> Delta**",
    "ours-local-duckdb": "**ours: rebuild from the local log -> DuckDB**",
    "kafka-streams": "Kafka Streams KTable restore (RocksDB)",
    "spark-merge": "Spark foreachBatch + Delta MERGE",
    "naive-duckdb": "naive loop, per-row DuckDB upserts",
}
OURS = ("ours-duckdb", "ours-delta", "ours-local-duckdb")


def goals(name: str, events: int) -> list[tuple[str, float]]:
    """Issue 22's goals for one of ours: (the peer, the least ratio of our rate to its rate)."""
    if name == "ours-local-duckdb":
        return [("raw-consume", 1.0)]
    return [("kafka-streams", 1.0 if events >= 10_000_000 else 0.3), ("spark-merge", 3.0)]


def machine() -> dict[str, Any]:
    """Cores, CPU model, memory, kernel, and the load when asked."""
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
    model = next(
        (ln.split(":", 1)[1].strip() for ln in lscpu.splitlines() if ln.startswith("Model name")),
        "?",
    )
    meminfo = Path("/proc/meminfo").read_text().split()
    mem_gib = int(meminfo[meminfo.index("MemTotal:") + 1]) / 2**20
    return {
        "nproc": len(__import__("os").sched_getaffinity(0)),
        "cpu": model,
        "mem_gib": round(mem_gib, 1),
        "kernel": platform.release(),
    }


def versions() -> dict[str, str]:
    """Python, the project's data libraries, and the Kafka Streams peer's jars."""
    from bench.replay import peers

    out = {"python": platform.python_version()}
    for name in ("pyspark", "delta-spark", "duckdb", "confluent-kafka", "pyarrow"):
        out[name] = md.version(name)
    out["kafka broker"] = "4.1.1"
    out.update(peers.versions())
    return out


def _rate(r: dict[str, Any]) -> float:
    return float(r["events_per_s"])


def markdown(meta: dict[str, Any], results: dict[str, dict[str, Any]]) -> str:
    """The results table, then the ratios of ours to every other contender."""
    m = meta["machine"]
    lines = [
        f"{meta['records']:,} records ({meta['events']:,} change events + tombstones) over "
        f"{meta['keys']:,} keys, {meta['partitions']} partitions, {meta['live_rows']:,} live rows "
        f"at the end. Machine: {m['nproc']} cores ({m['cpu']}), {m['mem_gib']} GiB.",
        "",
        "| contender | records | wall s | events/s | peak RSS MB | CPU s | ev per CPU-s "
        "| load before | table |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for name, r in results.items():
        per_cpu = r["records"] / r["cpu_s"] if r["cpu_s"] else 0.0
        note = " (prefix)" if r.get("subset") else ""
        lines.append(
            f"| {LABELS.get(name, name)} | {r['records']:,}{note} | {r['seconds']:.1f} "
            f"| {_rate(r):,.0f} | {r['peak_rss_mb']:,.0f} | {r['cpu_s']:.0f} | {per_cpu:,.0f} "
            f"| {r['loadavg_1m_before']:.1f} | {r['check']} |"
        )
    warm = [n for n in OURS if "warm_events_per_s" in results.get(n, {})]
    if warm:
        lines += ["", "Ours warm: the second rebuild of a long-lived session (another process, "
                  "HotSpot's full JIT as `--follow` runs; the figures above are a one-shot "
                  "replay's, as `replicator replay` runs it):", "",
                  "| contender | wall s | events/s |", "|---|---:|---:|"]  # fmt: skip
        lines += [
            f"| {n} | {results[n]['warm_seconds']:.1f} | {results[n]['warm_events_per_s']:,.0f} |"
            for n in warm
        ]
    others = [n for n in results if n not in OURS]
    ours = [n for n in OURS if n in results]
    if ours and others:
        lines += ["", "| ours / | " + " | ".join(others) + " | goal |"]
        lines.append("|---|" + "---:|" * (len(others) + 1))
        for name in ours:
            ratios = " | ".join(f"{_rate(results[name]) / _rate(results[o]):.2f}x" for o in others)
            met = [
                f"{least:g}x {peer}: "
                + ("met" if _rate(results[name]) >= least * _rate(results[peer]) else "not met")
                for peer, least in goals(name, meta["events"])
                if peer in results
            ]
            lines.append(f"| {name} | {ratios} | {'; '.join(met) or 'n/a'} |")
    pairs = [("local-raw", "raw-consume"), ("local-read", "spark-read")]
    sources = [(a, b) for a, b in pairs if a in results and b in results]
    if sources:
        lines += ["", "The sources alone, the local log against Kafka: " + "; ".join(
            f"{a} / {b} {_rate(results[a]) / _rate(results[b]):.2f}x" for a, b in sources
        )]  # fmt: skip
    return "\n".join(lines)


if __name__ == "__main__":
    data = json.loads(Path(sys.argv[1]).read_text())
    print(markdown(data["meta"], data["results"]))
