#!/usr/bin/env python3
"""Figures of scripts/bench-outbox: joins the receiver's arrivals (`<webhook-id> <ms>` lines)
with the outbox's rows (`<webhook-id>|<createdAt ms>` from sqlite3) and prints deliveries/s
and the latency from ledger commit to the receiver, as KEY=VALUE lines. Standard library only."""

import sys


def percentile(values, p):
    if not values:
        return 0
    index = min(len(values) - 1, max(0, int(round(p / 100 * len(values) + 0.5)) - 1))
    return values[index]


def main() -> int:
    arrivals_path, rows_path = sys.argv[1:3]
    arrivals = {}
    duplicates = 0
    with open(arrivals_path) as f:
        for line in f:
            parts = line.split()
            if len(parts) != 2:
                continue
            if parts[0] in arrivals:
                duplicates += 1
                continue
            arrivals[parts[0]] = int(parts[1])
    created = {}
    with open(rows_path) as f:
        for line in f:
            parts = line.strip().split("|")
            if len(parts) == 2:
                created[parts[0]] = int(parts[1])
    latencies = sorted(arrivals[i] - created[i] for i in created if i in arrivals)
    missing = sum(1 for i in created if i not in arrivals)
    first_commit = min(created.values()) if created else 0
    last_arrival = max(arrivals.values()) if arrivals else 0
    seconds = max(0.001, (last_arrival - first_commit) / 1000)
    print(f"events={len(created)}")
    print(f"delivered={len(latencies)}")
    print(f"missing={missing}")
    print(f"redelivered={duplicates}")
    print(f"window_s={seconds:.3f}")
    print(f"deliveries_per_s={len(latencies) / seconds:.0f}")
    first_arrival = min(arrivals.values()) if arrivals else 0
    sending = max(0.001, (last_arrival - first_arrival) / 1000)
    # The sender alone: from the first arrival to the last (the ingest may still be running at first).
    print(f"arrival_window_s={sending:.3f}")
    print(f"arrivals_per_s={len(arrivals) / sending:.0f}")
    print(f"latency_p50_ms={percentile(latencies, 50)}")
    print(f"latency_p99_ms={percentile(latencies, 99)}")
    print(f"latency_max_ms={latencies[-1] if latencies else 0}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
