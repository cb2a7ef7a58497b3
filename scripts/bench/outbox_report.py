#!/usr/bin/env python3
"""Figures of scripts/bench-outbox: joins the receiver's arrivals (`<webhook-id> <ms>` lines)
with the outbox's rows (`<webhook-id>|<createdAt ms>` from sqlite3) and prints, as KEY=VALUE
lines, for the live phase: deliveries/s and the latency from ledger commit to the receiver;
and, given the catch-up phase's rows, how fast the queued backlog was delivered once the
endpoint was enabled; and, given the paced phase's rows, the latency at a rate billingd keeps
up with. Each rows file holds every row at the end of its phase. Standard library only.

    outbox_report.py ARRIVALS LIVE_ROWS [CATCH_UP_ROWS ENABLED_AT_MS [PACED_ROWS]]
"""

import sys


def percentile(values, p):
    if not values:
        return 0
    index = min(len(values) - 1, max(0, int(round(p / 100 * len(values) + 0.5)) - 1))
    return values[index]


def read_rows(path):
    created = {}
    with open(path) as f:
        for line in f:
            parts = line.strip().split("|")
            if len(parts) == 2:
                created[parts[0]] = int(parts[1])
    return created


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
    created = read_rows(rows_path)
    latencies = sorted(arrivals[i] - created[i] for i in created if i in arrivals)
    missing = sum(1 for i in created if i not in arrivals)
    first_commit = min(created.values()) if created else 0
    live_arrivals = [arrivals[i] for i in created if i in arrivals]
    last_arrival = max(live_arrivals) if live_arrivals else 0
    seconds = max(0.001, (last_arrival - first_commit) / 1000)
    print(f"events={len(created)}")
    print(f"delivered={len(latencies)}")
    print(f"redelivered={duplicates}")
    print(f"window_s={seconds:.3f}")
    print(f"deliveries_per_s={len(latencies) / seconds:.0f}")
    first_arrival = min(live_arrivals) if live_arrivals else 0
    sending = max(0.001, (last_arrival - first_arrival) / 1000)
    # The sender alone: from the first arrival to the last (the ingest may still be running at first).
    print(f"arrival_window_s={sending:.3f}")
    print(f"arrivals_per_s={len(live_arrivals) / sending:.0f}")
    print(f"latency_p50_ms={percentile(latencies, 50)}")
    print(f"latency_p99_ms={percentile(latencies, 99)}")
    print(f"latency_max_ms={latencies[-1] if latencies else 0}")
    if len(sys.argv) > 4:
        backlog = {i: c for i, c in read_rows(sys.argv[3]).items() if i not in created}
        enabled_at = int(sys.argv[4])
        caught = sorted(arrivals[i] for i in backlog if i in arrivals)
        missing += sum(1 for i in backlog if i not in arrivals)
        print(f"catch_up_events={len(backlog)}")
        print(f"catch_up_delivered={len(caught)}")
        if caught:
            window = max(0.001, (caught[-1] - caught[0]) / 1000)
            # From the first arrival: the sender looks at most once a second, and the enable
            # (another process) cannot wake it.
            print(f"catch_up_first_arrival_after_enable_ms={caught[0] - enabled_at}")
            print(f"catch_up_window_s={window:.3f}")
            print(f"catch_up_deliveries_per_s={len(caught) / window:.0f}")
    if len(sys.argv) > 5:
        earlier = read_rows(sys.argv[3])
        paced = {i: c for i, c in read_rows(sys.argv[5]).items() if i not in earlier}
        waits = sorted(arrivals[i] - c for i, c in paced.items() if i in arrivals)
        missing += sum(1 for i in paced if i not in arrivals)
        print(f"paced_events={len(paced)}")
        print(f"paced_delivered={len(waits)}")
        if paced:
            window = max(0.001, (max(arrivals.get(i, 0) for i in paced) - min(paced.values())) / 1000)
            print(f"paced_deliveries_per_s={len(waits) / window:.0f}")
        print(f"paced_latency_p50_ms={percentile(waits, 50)}")
        print(f"paced_latency_p99_ms={percentile(waits, 99)}")
        print(f"paced_latency_max_ms={waits[-1] if waits else 0}")
    print(f"missing={missing}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
