"""The replay benchmark's plot, drawn from a result JSON (never from typed-in numbers).

    bench/replay/plot.sh bench/results/replay-1000k-....json bench/replay-1m.png

Runs in ``.venv-bench`` (matplotlib is not a project dependency; ``plot.sh`` creates it). Two
panels: events/s per contender (log scale, the goals as lines) and peak RSS of each process tree.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib  # type: ignore[import-not-found]

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # type: ignore[import-not-found]

SHORT = {
    "raw-consume": "raw consume\n(confluent-kafka)",
    "spark-read": "Spark Kafka\nsource, read",
    "local-raw": "local log\n(one process)",
    "local-read": "local log's\nSpark source, read",
    "ours-duckdb": "ours\n-> DuckDB",
    "ours-delta": "ours\n-> Delta",
    "ours-local-duckdb": "ours, local log\n-> DuckDB",
    "kafka-streams": "Kafka Streams\nKTable restore",
    "spark-merge": "Spark foreach-\nBatch + MERGE",
    "naive-duckdb": "naive per-row\nDuckDB upserts*",
}


def main(source: str, target: str) -> None:
    data = json.loads(Path(source).read_text())
    meta, results = data["meta"], data["results"]
    names = list(results)
    rates = [results[n]["events_per_s"] for n in names]
    rss = [results[n]["peak_rss_mb"] / 1024 for n in names]
    colors = ["#c0392b" if n.startswith("ours") else "#7f8c8d" for n in names]
    labels = [SHORT.get(n, n) for n in names]
    fig, (left, right) = plt.subplots(1, 2, figsize=(14, 5.5), width_ratios=[3, 2])
    per_cpu = [results[n]["records"] / max(results[n]["cpu_s"], 1e-9) for n in names]
    at = range(len(names))
    walls = left.bar([x - 0.2 for x in at], rates, 0.4, color=colors, label="events/s (wall)")
    cpus = left.bar([x + 0.2 for x in at], per_cpu, 0.4, color=colors, alpha=0.45, hatch="//",
                    label="events per CPU-second (process tree)")  # fmt: skip
    left.set_xticks(list(at), labels)
    left.set_yscale("log")
    left.set_ylabel("log scale")
    for bar in [*walls, *cpus]:
        left.annotate(f"{bar.get_height():,.0f}", (bar.get_x() + bar.get_width() / 2,
                      bar.get_height()), ha="center", va="bottom", fontsize=6)  # fmt: skip
    if "kafka-streams" in results:  # issue 22's goal: a ratio to the Kafka Streams restore
        least = 1.0 if meta["events"] >= 10_000_000 else 0.3
        goal = least * results["kafka-streams"]["events_per_s"]
        left.axhline(goal, color="#2c3e50", linestyle="--", linewidth=1,
                     label=f"goal: {least:g}x Kafka Streams")  # fmt: skip
    left.legend(fontsize=8, loc="upper right")
    left.tick_params(axis="x", labelsize=7)
    m = meta["machine"]
    loads = [r["loadavg_1m_before"] for r in results.values() if "loadavg_1m_before" in r]
    load = f"load before each {min(loads):.1f}-{max(loads):.1f}" if loads else "load not recorded"
    naive = "; *naive: measured on a prefix" if "naive-duckdb" in results else ""
    left.set_title(
        f"Full rebuild of {meta['records']:,} changelog records over {meta['keys']:,} keys, "
        f"{meta['partitions']} partitions\n{m['nproc']} cores, {m['mem_gib']} GiB, {load}{naive}",
        fontsize=9,
    )
    right.barh(labels, rss, color=colors)
    right.invert_yaxis()
    right.set_xlabel("peak RSS of the process tree, GiB (JVMs included)")
    right.tick_params(axis="y", labelsize=7)
    fig.tight_layout()
    fig.savefig(target, dpi=110)
    print(f"wrote {target}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
