#!/usr/bin/env python3
"""Generates N distinct, signed Stripe webhook deliveries for scripts/bench-ingest.

Each delivery wraps one of the real objects in Fixtures/objects/ in a Stripe event envelope of
the matching type, with the event id and the object's id made unique per event, and signs it
the way Stripe does: `Stripe-Signature: t=<now>,v1=<hex HMAC-SHA256("<t>.<body>", secret)>`.
Each round of the shapes is one user's: their customer object, and the subscription, invoice,
payment method and Checkout session that name it, with the user's id in `metadata.app_user_id`
and `client_reference_id`, and the invoice and the session naming that round's subscription; as
many users as rounds. (The fixtures all name `user_42`, one customer and one subscription: sent as
they are, every event would announce a change for a user with thousands of customers, and every
invoice would belong to one subscription with thousands of invoices, which no real account has.)

Output: one delivery per line, `<Stripe-Signature value>\\t<compact JSON body>` (compact JSON
never contains a raw tab or newline). The Lua script of wrk loads this file.

The secret comes from the environment (STRIPE_WEBHOOK_SECRET), never from the command line.
Standard library only.
"""

import argparse
import hashlib
import hmac
import json
import os
import sys
import time

# (fixture file, event type): the shapes the benchmark sends, round-robin.
SHAPES = [
    ("subscription.json", "customer.subscription.updated"),
    ("invoice.json", "invoice.paid"),
    ("customer.json", "customer.updated"),
    ("payment_method.json", "payment_method.attached"),
    ("checkout_session.json", "checkout.session.completed"),
    ("price.json", "price.updated"),
    ("product.json", "product.updated"),
]

API_VERSION = "2026-10-28.clover"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, required=True, help="number of distinct events")
    parser.add_argument("--run", required=True, help="run tag, part of every event id (alphanumeric)")
    parser.add_argument("--fixtures", required=True, help="the Fixtures/objects directory")
    parser.add_argument("--out", required=True, help="file to write")
    args = parser.parse_args()

    secret = os.environ.get("STRIPE_WEBHOOK_SECRET", "")
    if not secret.startswith("whsec_"):
        print("gen_events: STRIPE_WEBHOOK_SECRET (whsec_…) must be set in the environment", file=sys.stderr)
        return 2
    if args.events < 1:
        print("gen_events: --events must be at least 1", file=sys.stderr)
        return 2
    if not args.run.isalnum():
        print("gen_events: --run must be alphanumeric", file=sys.stderr)
        return 2

    objects = []
    for filename, event_type in SHAPES:
        with open(os.path.join(args.fixtures, filename), encoding="utf-8") as handle:
            obj = json.load(handle)
        if not isinstance(obj, dict) or not isinstance(obj.get("id"), str):
            print(f"gen_events: {filename} is not a Stripe object with an id", file=sys.stderr)
            return 2
        objects.append((obj, event_type))

    subscriptions = [obj["id"] for obj, _ in objects if obj.get("object") == "subscription"]
    if len(subscriptions) != 1:
        print("gen_events: the shapes need exactly one subscription", file=sys.stderr)
        return 2
    fixture_subscription = json.dumps(subscriptions[0])
    subscription_prefix = subscriptions[0]

    key = secret.encode("utf-8")
    now = int(time.time())
    timestamp = str(now).encode("ascii")
    dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode

    with open(args.out, "w", encoding="utf-8", newline="\n") as out:
        for i in range(args.events):
            template, event_type = objects[i % len(objects)]
            obj = dict(template)  # shallow copy: only the id changes
            if template.get("object") != "subscription":  # the round's, set below
                obj["id"] = f"{template['id']}b{args.run}n{i}"
            round_ = i // len(objects)
            customer = f"cus_bench{args.run}c{round_}"
            user = f"user_bench{args.run}u{round_}"
            if template.get("object") == "customer":
                obj["id"] = customer
            elif isinstance(template.get("customer"), str):
                obj["customer"] = customer
            if isinstance(template.get("metadata"), dict) and "app_user_id" in template["metadata"]:
                obj["metadata"] = dict(template["metadata"], app_user_id=user)
            if isinstance(template.get("client_reference_id"), str):
                obj["client_reference_id"] = user
            event = {
                "id": f"evt_bench_{args.run}_{i}",
                "object": "event",
                "api_version": API_VERSION,
                "created": now,
                "data": {"object": obj},
                "livemode": False,
                "pending_webhooks": 1,
                "request": {"id": None, "idempotency_key": None},
                "type": event_type,
            }
            # Every reference to the fixtures' subscription (the subscription's own id, the
            # invoice's parent and lines, the session's) names this round's subscription.
            body = dumps(event).replace(fixture_subscription, f'"{subscription_prefix}b{args.run}r{round_}"')
            raw = body.encode("utf-8")
            signature = hmac.new(key, timestamp + b"." + raw, hashlib.sha256).hexdigest()
            out.write(f"t={now},v1={signature}\t{body}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
