#!/usr/bin/env python3
"""Prints the figures of scripts/bench-ingest as a table, or as one JSON object (--json).

Reads KEY=VALUE lines (written by scripts/bench-ingest) from the file named on the command line.
Keys: events, connections, threads, nproc, cpu_model, stored, and per route (prefix `ingest_` or
`noop_`) the fields of wrk's BENCH_RESULT line plus peak_rss_kib, server_cpu_s, wrk_cpu_s.
"""

import json
import sys

# Issue 14: a burst stored and applied at 40 % of the HTTP ceiling, at least 20,000/s; under a
# steady 2,000/s, acknowledgements within 10 ms at p99.
TARGET_EVENTS_PER_S = 20000
TARGET_RATIO = 0.4
TARGET_PACED_P99_MS = 10


def load(path):
    values = {}
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            line = line.rstrip("\n")
            if "=" in line:
                key, value = line.split("=", 1)
                values[key] = value
    return values


def route(values, prefix, stored=None):
    def number(key):
        return float(values[f"{prefix}_{key}"])

    duration_s = number("duration_us") / 1e6
    requests = int(number("responses"))
    figures = {
        "requests": requests,
        "duration_s": round(duration_s, 3),
        "requests_per_s": round(requests / duration_s, 1),
        "p50_ms": round(number("p50_us") / 1000, 2),
        "p90_ms": round(number("p90_us") / 1000, 2),
        "p99_ms": round(number("p99_us") / 1000, 2),
        "max_ms": round(number("max_us") / 1000, 2),
        "non_2xx": int(number("non2xx")),
        "socket_errors": int(sum(number(k) for k in ("err_connect", "err_read", "err_write"))),
        "server_peak_rss_mib": round(number("peak_rss_kib") / 1024, 1),
        "server_cpu_percent": round(100 * number("server_cpu_s") / duration_s),
        # wrk's threads from their first request to their last response.
        "wrk_cpu_percent": round(100 * number("wrk_load_cpu_s") / duration_s),
        # Everything else that ran on the machine meanwhile (should be near 0: a busy machine
        # makes the figures meaningless).
        "other_cpu_percent": max(0, round(100 * (
            number("machine_cpu_s") - number("server_cpu_s") - number("wrk_total_cpu_s")) / number("window_s"))),
    }
    if stored is not None:
        figures["stored"] = stored
        figures["durable_events_per_s"] = round(stored / duration_s, 1)
    return figures


def main():
    as_json = "--json" in sys.argv[1:]
    paths = [a for a in sys.argv[1:] if a != "--json"]
    values = load(paths[0])
    stored = int(values["stored"])
    ingest = route(values, "ingest", stored=stored)
    noop = route(values, "noop")
    ratio = ingest["durable_events_per_s"] / noop["requests_per_s"] if noop["requests_per_s"] else 0.0
    result = {
        "events": int(values["events"]),
        "connections": int(values["connections"]),
        "threads": int(values["threads"]),
        "machine": {"nproc": int(values["nproc"]), "cpu": values["cpu_model"]},
        "ingest": ingest,
        "noop": noop,
        "ingest_to_ceiling_ratio": round(ratio, 3),
        "targets": {
            "durable_events_per_s": {"target": TARGET_EVENTS_PER_S, "met": ingest["durable_events_per_s"] >= TARGET_EVENTS_PER_S},
            "ratio_to_ceiling": {"target": TARGET_RATIO, "met": ratio >= TARGET_RATIO},
        },
    }
    if "pace_ms" in values:
        # A steady load: the rate is what was offered, so the figure that counts is the latency.
        result["pace_ms"] = int(values["pace_ms"])
        result["targets"] = {"paced_p99_ms": {"target": TARGET_PACED_P99_MS, "met": ingest["p99_ms"] < TARGET_PACED_P99_MS}}
    result["applier"] = {
        "pending_when_load_ended": int(values["applier_pending_at_end"]),
        "drain_seconds_after_load": float(values["applier_drain_s"]),
        "pending_left": int(values["applier_pending_left"]),
        "inbox_statuses": values["inbox_statuses"],
    }
    if "pg_statements" in values:
        # Every statement is a round trip; a transaction is a group commit, an applier pass or a claim.
        statements, commits = int(values["pg_statements"]), max(1, int(values["pg_commits"]))
        result["postgresql"] = {
            "statements": statements,
            "transactions": int(values["pg_commits"]),
            "statements_per_event": round(statements / max(1, stored), 2),
            "statements_per_transaction": round(statements / commits, 1),
            "events_per_transaction": round(stored / commits, 1),
        }
    if as_json:
        print(json.dumps(result, separators=(",", ":")))
        return

    print(f"billingd ingest benchmark: {result['events']} events, {result['connections']} connections, "
          f"{result['threads']} wrk threads; {values['nproc']} cores ({values['cpu_model']})")
    header = ("route", "requests", "req/s", "p50", "p99", "peak RSS", "server CPU", "wrk CPU", "other CPU")
    rows = []
    for name, figures in (("POST /webhooks/stripe", ingest), ("POST /bench/noop", noop)):
        rows.append((
            name, str(figures["requests"]), f"{figures['requests_per_s']:,.0f}",
            f"{figures['p50_ms']:.2f} ms", f"{figures['p99_ms']:.2f} ms",
            f"{figures['server_peak_rss_mib']:.1f} MiB",
            f"{figures['server_cpu_percent']}%", f"{figures['wrk_cpu_percent']}%", f"{figures['other_cpu_percent']}%",
        ))
    widths = [max(len(row[i]) for row in [header] + rows) for i in range(len(header))]
    for row in [header] + rows:
        print("  ".join(cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i]) for i, cell in enumerate(row)))
    print(f"durable events/s: {ingest['durable_events_per_s']:,.0f} ({stored} stored in {ingest['duration_s']:.2f} s)")
    print(f"ingest / no-op ceiling: {ratio:.2f}")
    applier = result["applier"]
    print(f"applier (not timed): {applier['pending_when_load_ended']} events pending when the load ended, "
          f"drained {applier['drain_seconds_after_load']:.1f} s later; inbox statuses {applier['inbox_statuses']}")
    if "postgresql" in result:
        pg = result["postgresql"]
        print(f"PostgreSQL: {pg['statements']} statements (round trips) in {pg['transactions']} transactions: "
              f"{pg['statements_per_event']} per event, {pg['statements_per_transaction']} per transaction, "
              f"{pg['events_per_transaction']} events per transaction")
    met = result["targets"]
    busiest = max(ingest["other_cpu_percent"], noop["other_cpu_percent"])
    if busiest > 10:
        print(f"WARNING: other processes used up to {busiest}% CPU during the runs; the figures are not representative")
    if "paced_p99_ms" in met:
        print(f"paced ({result['pace_ms']} ms between requests on each connection): "
              f"target p99 < {TARGET_PACED_P99_MS} ms: {'met' if met['paced_p99_ms']['met'] else 'MISSED'}")
        return
    print(f"target >= {TARGET_EVENTS_PER_S:,} durable events/s: {'met' if met['durable_events_per_s']['met'] else 'MISSED'}; "
          f"target >= {TARGET_RATIO} of the ceiling: {'met' if met['ratio_to_ceiling']['met'] else 'MISSED'}")


if __name__ == "__main__":
    main()
