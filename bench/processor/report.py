"""The processor benchmark's summary: medians, ratios to quixstreams, and a markdown table."""

from __future__ import annotations

import statistics
from typing import Any


def median_of(runs: list[dict[str, Any]], field: str) -> float:
    return float(statistics.median(r[field] for r in runs))


def summarize(results: dict[str, dict[str, list[dict[str, Any]]]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for system, modes in results.items():
        out[system] = {
            mode: {
                "events_per_s": median_of(runs, "events_per_s"),
                "events_per_cpu_s": median_of(runs, "events_per_cpu_s"),
                "seconds": median_of(runs, "seconds"),
                "events": median_of(runs, "events"),
                "peak_rss_mb": median_of(runs, "peak_rss_mb"),
                "all_states_ok": all(r["state_ok"] for r in runs),
                "runs": len(runs),
            }
            for mode, runs in modes.items()
            if runs
        }
    quix = out["quix"]
    for system in out:
        if system != "quix":
            out[system]["ratio"] = {
                f"{mode}{per}": out[system][mode][f"events_per{per}_s"]
                / quix[mode][f"events_per{per}_s"]
                for mode in ("process", "restore")
                for per in ("", "_cpu")
                if mode in out[system]
            }
    return out


def table(summary: dict[str, Any], meta: dict[str, Any]) -> str:
    lines = [
        f"Input: {meta['events']:,} payments over {meta['customers']:,} customers, "
        f"{meta['partitions']} partitions; commit every {meta['commit_events']} events or "
        f"{meta['commit_interval_s']} s (both systems); median of {meta['repeat']}.",
        f"Machine: {meta['machine']['nproc']} cores, {meta['machine']['cpu']}.",
        "",
        "| system | throughput ev/s | restore ev/s | restored records | restore s "
        "| ev per CPU-s (thr / restore) | peak RSS MB (thr / restore) | state = reference "
        "| ours / quix: thr | restore | thr per CPU-s | restore per CPU-s |",
        "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|",
    ]
    for system, s in summary.items():
        p, r = s["process"], s.get("restore")
        ratio = s.get("ratio")
        ratios = (
            " | ".join(
                f"{ratio[k]:.2f}x" if k in ratio else "-"
                for k in ("process", "restore", "process_cpu", "restore_cpu")
            )
            if ratio
            else "1 | 1 | 1 | 1"
        )
        ok = "yes" if p["all_states_ok"] and (r is None or r["all_states_ok"]) else "**NO**"
        if r is None:
            restore = "- | - | - "
            cpu, rss = f"{p['events_per_cpu_s']:,.0f} / -", f"{p['peak_rss_mb']:.0f} / -"
        else:
            restore = f"{r['events_per_s']:,.0f} | {r['events']:,.0f} | {r['seconds']:.2f} "
            cpu = f"{p['events_per_cpu_s']:,.0f} / {r['events_per_cpu_s']:,.0f}"
            rss = f"{p['peak_rss_mb']:.0f} / {r['peak_rss_mb']:.0f}"
        lines.append(
            f"| {system} | {p['events_per_s']:,.0f} | {restore}| {cpu} | {rss} | {ok} | {ratios} |"
        )
    return "\n".join(lines)
