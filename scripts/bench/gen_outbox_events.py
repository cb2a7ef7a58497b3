#!/usr/bin/env python3
"""Generates the signed Stripe deliveries of scripts/bench-outbox: for each of N users, a
customer.created tying a customer to the user (metadata.app_user_id), then, in a second file,
a customer.subscription.created of an active Pro subscription for that customer, and, in a
third file, a customer.subscription.updated moving that subscription to Enterprise, and in a
fourth, one moving it back to Pro. Each
subscription changes its user's view: two outbound events (subscription.started and
entitlement.updated); so does each move (subscription.plan_changed and entitlement.updated).

Output lines: `<Stripe-Signature>\\t<compact JSON body>`, as scripts/bench/ingest.lua reads them.
The secret comes from STRIPE_WEBHOOK_SECRET in the environment. Standard library only.
"""

import argparse
import hashlib
import hmac
import json
import os
import sys
import time

API_VERSION = "2026-10-28.clover"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, required=True)
    parser.add_argument("--run", required=True, help="run tag, part of every id")
    parser.add_argument("--fixtures", required=True, help="the Fixtures/objects directory")
    parser.add_argument("--customers", required=True, help="file of customer.created deliveries")
    parser.add_argument("--subscriptions", required=True, help="file of customer.subscription.created deliveries")
    parser.add_argument("--changes", required=True, help="file of customer.subscription.updated deliveries (Pro to Enterprise)")
    parser.add_argument("--returns", required=True, help="file of customer.subscription.updated deliveries (back to Pro)")
    parser.add_argument("--base-time", type=int, default=None,
                        help="the Unix time the events and periods are dated from (default now); the signatures always use now")
    args = parser.parse_args()
    secret = os.environ.get("STRIPE_WEBHOOK_SECRET", "")
    if not secret.startswith("whsec_"):
        print("gen_outbox_events: STRIPE_WEBHOOK_SECRET must be set", file=sys.stderr)
        return 2
    with open(os.path.join(args.fixtures, "customer.json")) as f:
        customer_template = json.load(f)
    with open(os.path.join(args.fixtures, "subscription.json")) as f:
        subscription_template = json.load(f)
    key = secret.encode()
    signed_at = int(time.time())
    # Signing again later (same --base-time) gives the same events with fresh signatures: a
    # period that moved would be a renewal, and announce events the benchmark does not count.
    now = args.base_time if args.base_time is not None else signed_at

    def line(event_id, event_type, obj, created):
        body = json.dumps({
            "id": event_id, "object": "event", "api_version": API_VERSION, "created": created, "livemode": False,
            "pending_webhooks": 1, "type": event_type, "data": {"object": obj},
            "request": {"id": None, "idempotency_key": None},
        }, separators=(",", ":"))
        signature = hmac.new(key, f"{signed_at}.{body}".encode(), hashlib.sha256).hexdigest()
        return f"t={signed_at},v1={signature}\t{body}\n"

    with open(args.customers, "w") as customers, open(args.subscriptions, "w") as subscriptions, \
            open(args.changes, "w") as changes, open(args.returns, "w") as returns:
        for n in range(args.users):
            customer_id = f"cus_{args.run}{n}"
            customer = dict(customer_template, id=customer_id, livemode=False, metadata={"app_user_id": f"user_{args.run}_{n}"})
            customers.write(line(f"evt_{args.run}c{n}", "customer.created", customer, now - 100))
            subscription = json.loads(json.dumps(subscription_template))
            subscription.update(id=f"sub_{args.run}{n}", customer=customer_id, status="active", livemode=False)
            item = subscription["items"]["data"][0]
            item.update(id=f"si_{args.run}{n}", subscription=subscription["id"], quantity=1,
                        current_period_start=now - 60, current_period_end=now + 30 * 86400)
            item["price"] = dict(item["price"], id="price_ProMonthly", lookup_key="pro_monthly", product="prod_Pro")
            item.pop("plan", None)
            subscription["items"]["data"] = [item]
            subscriptions.write(line(f"evt_{args.run}s{n}", "customer.subscription.created", subscription, now - 50))
            pro = item
            item = dict(item, price=dict(item["price"], id="price_EnterpriseMonthly", lookup_key="enterprise_monthly",
                                         product="prod_Enterprise"))
            subscription["items"]["data"] = [item]
            changes.write(line(f"evt_{args.run}u{n}", "customer.subscription.updated", subscription, now - 40))
            subscription["items"]["data"] = [pro]
            returns.write(line(f"evt_{args.run}r{n}", "customer.subscription.updated", subscription, now - 30))
    return 0


if __name__ == "__main__":
    sys.exit(main())
