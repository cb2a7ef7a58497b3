#!/usr/bin/env python3
"""Fills a billingd inbox with N mixed, realistic Stripe events for scripts/bench-apply.

The events follow many customers through subscription lifecycles (customer, checkout, payment
method, subscription updates, invoices through draft/open/paid, entitlements), built from the
committed fixtures in Fixtures/objects, several events per object and many in the same second,
so the applier meets stale snapshots and ties as it does in production.
Usage: gen_apply_inbox.py DATABASE N
"""
import copy
import json
import os
import sqlite3
import sys

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def fixture(name):
    with open(os.path.join(root, "Fixtures", "objects", name + ".json")) as f:
        return json.load(f)


def main():
    database, count = sys.argv[1], int(sys.argv[2])
    base = {name: fixture(name) for name in (
        "customer", "subscription", "invoice", "payment_method", "checkout_session", "active_entitlement_summary")}
    rows = []
    t0 = 1_780_000_000
    n = 0
    customer_index = 0
    while n < count:
        c = customer_index
        customer_index += 1
        cus, sub, pm = f"cus_B{c}", f"sub_B{c}", f"pm_B{c}"
        t = t0 + c
        plan = []

        o = copy.deepcopy(base["customer"]); o.update(id=cus, metadata={"app_user_id": f"user_{c}"})
        plan.append(("customer.created", t, o))
        o = copy.deepcopy(base["checkout_session"]); o.update(id=f"cs_test_B{c}", customer=cus, subscription=sub, client_reference_id=f"user_{c}")
        plan.append(("checkout.session.completed", t + 60, o))
        o = copy.deepcopy(base["payment_method"]); o.update(id=pm, customer=cus)
        plan.append(("payment_method.attached", t + 60, o))
        for status in ("incomplete", "active"):
            o = copy.deepcopy(base["subscription"]); o.update(id=sub, customer=cus, status=status)
            plan.append(("customer.subscription.created" if status == "incomplete" else "customer.subscription.updated", t + 60, o))
        for k in range(2):
            for status, kind in (("draft", "invoice.created"), ("open", "invoice.finalized"), ("paid", "invoice.paid")):
                o = copy.deepcopy(base["invoice"]); o.update(id=f"in_B{c}_{k}", customer=cus, status=status)
                o["parent"]["subscription_details"]["subscription"] = sub
                plan.append((kind, t + 60 + k * 2_592_000, o))
        o = copy.deepcopy(base["active_entitlement_summary"]); o.update(customer=cus)
        plan.append(("entitlements.active_entitlement_summary.updated", t + 61, o))
        o = copy.deepcopy(base["customer"]); o.update(id=cus, name=f"Customer {c}", metadata={"app_user_id": f"user_{c}"})
        plan.append(("customer.updated", t + 120, o))
        # A late, duplicated-in-spirit older snapshot: the applier must keep the newer one.
        o = copy.deepcopy(base["subscription"]); o.update(id=sub, customer=cus, status="incomplete")
        plan.append(("customer.subscription.updated", t + 30, o))

        for event_type, created, obj in plan:
            if n >= count:
                break
            event_id = f"evt_B{n}"
            body = json.dumps({
                "id": event_id, "object": "event", "api_version": "2026-10-28.clover", "created": created,
                "data": {"object": obj}, "livemode": False, "pending_webhooks": 1,
                "request": {"id": None, "idempotency_key": None}, "type": event_type,
            }, separators=(",", ":")).encode()
            object_id = obj.get("id") or obj.get("customer")
            rows.append((event_id, "", 0, event_type, "2026-10-28.clover", created, object_id, obj.get("object"),
                         0, "webhook", 0, body))
            n += 1
    db = sqlite3.connect(database)
    for row in rows:
        cursor = db.execute(
            "INSERT INTO inboxEvent (eventID, account, livemode, type, apiVersion, created, objectID, objectType,"
            " receivedAt, source, secretIndex, status) VALUES (?,?,?,?,?,?,?,?,?,?,?,'pending')", row[:-1])
        db.execute("INSERT INTO inboxBody (seq, body) VALUES (?, ?)", (cursor.lastrowid, row[-1]))
    db.commit()
    print(f"{len(rows)} events for {customer_index} customers", file=sys.stderr)


if __name__ == "__main__":
    main()
