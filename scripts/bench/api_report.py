#!/usr/bin/env python3
"""Prints the figures of scripts/bench-api as a table, or as one JSON object (--json).

Reads the KEY=VALUE lines scripts/bench-api wrote: users, connections, threads, runs, nproc,
cpu_model, and per wrk run (prefix run1_, run2_ …, warmup_, ceiling_) the fields of the
BENCH_RESULT line of scripts/bench/api_reads.lua plus server_cpu_s, machine_cpu_s, peak_rss_kib.
"""

import json
import statistics
import sys

# Issue 14: at least 25,000 reads/s and half the HTTP ceiling, p99 under 5 ms, on the
# 100,000-user ledger.
TARGET_READS_PER_S = 25_000
TARGET_RATIO = 0.5
TARGET_P99_MS = 5.0


def load(path):
    values = {}
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            key, sep, value = line.rstrip("\n").partition("=")
            if sep:
                values[key] = value
    return values


def run(values, prefix):
    def number(key):
        return float(values[f"{prefix}_{key}"])

    seconds = number("duration_us") / 1e6
    responses = int(number("responses"))
    return {
        "reads": responses,
        "seconds": round(seconds, 2),
        "reads_per_s": round(responses / seconds),
        "p50_ms": round(number("p50_us") / 1000, 2),
        "p90_ms": round(number("p90_us") / 1000, 2),
        "p99_ms": round(number("p99_us") / 1000, 2),
        "p999_ms": round(number("p999_us") / 1000, 2),
        "max_ms": round(number("max_us") / 1000, 2),
        "non_200": int(number("non2xx")),
        "server_cpu_percent": round(100 * number("server_cpu_s") / seconds),
        "machine_cpu_percent": round(100 * number("machine_cpu_s") / seconds),
        "peak_rss_mib": round(number("peak_rss_kib") / 1024, 1),
    }


def main():
    as_json = sys.argv[1] == "--json"
    values = load(sys.argv[-1])
    runs = [run(values, f"run{index}") for index in range(1, int(values["runs"]) + 1)]
    ceiling = run(values, "ceiling")
    median = {key: statistics.median(r[key] for r in runs) for key in ("reads_per_s", "p50_ms", "p90_ms", "p99_ms")}
    summary = {
        "users": int(values["users"]),
        "connections": int(values["connections"]),
        "threads": int(values["threads"]),
        "nproc": int(values["nproc"]),
        "cpu_model": values["cpu_model"],
        "catalog_loaded": values["catalog_loaded"] == "true",
        "ledger_mib": round(int(values["database_bytes"]) / 2**20),
        "ledger_generate_s": float(values["generate_s"]),
        "runs": runs,
        "median_reads_per_s": round(median["reads_per_s"]),
        "median_p50_ms": median["p50_ms"],
        "median_p99_ms": median["p99_ms"],
        "peak_rss_mib": max(r["peak_rss_mib"] for r in runs),
        "ceiling": ceiling,
        "target_reads_per_s_met": median["reads_per_s"] >= TARGET_READS_PER_S,
        "target_p99_met": median["p99_ms"] < TARGET_P99_MS,
        "ratio_to_ceiling": round(median["reads_per_s"] / ceiling["reads_per_s"], 2),
    }
    summary["target_ratio_met"] = summary["ratio_to_ceiling"] >= TARGET_RATIO
    if as_json:
        print(json.dumps(summary))
        return
    print(f"{summary['users']:,} users in a {summary['ledger_mib']} MiB ledger (made in {summary['ledger_generate_s']} s); "
          f"{summary['connections']} connections, {summary['threads']} wrk threads, {summary['nproc']} cores ({summary['cpu_model']})")
    if not summary["catalog_loaded"]:
        print("(serve did not load BILLINGD_PLANS: every paid user read as plan null)")
    print(f"{'run':>8} {'reads/s':>9} {'p50':>8} {'p90':>8} {'p99':>8} {'p99.9':>8} {'max':>8} {'server CPU':>11} {'all CPU':>8} {'peak RSS':>10}")
    for name, r in [(f"{i + 1}", r) for i, r in enumerate(runs)] + [("/healthz", ceiling)]:
        print(f"{name:>8} {r['reads_per_s']:>9,} {r['p50_ms']:>6.2f}ms {r['p90_ms']:>6.2f}ms {r['p99_ms']:>6.2f}ms "
              f"{r['p999_ms']:>6.2f}ms {r['max_ms']:>6.1f}ms {r['server_cpu_percent']:>10}% {r['machine_cpu_percent']:>7}% "
              f"{r['peak_rss_mib']:>7} MiB")
    verdict = lambda met: "met" if met else "NOT met"
    print(f"median {summary['median_reads_per_s']:,} reads/s (target >= {TARGET_READS_PER_S:,}: "
          f"{verdict(summary['target_reads_per_s_met'])}), p99 {summary['median_p99_ms']} ms "
          f"(target < {TARGET_P99_MS} ms: {verdict(summary['target_p99_met'])}); "
          f"the HTTP ceiling (/healthz) is {ceiling['reads_per_s']:,} requests/s, and reads are "
          f"{summary['ratio_to_ceiling']} of it (target >= {TARGET_RATIO}: {verdict(summary['target_ratio_met'])})")


if __name__ == "__main__":
    main()
