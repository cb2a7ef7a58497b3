#!/usr/bin/env python3
"""Fills a migrated billingd ledger with N app users for scripts/bench-api, straight in SQLite.

Every user has a Stripe customer (nine in ten tied by metadata.app_user_id, one in ten only by a
completed Checkout session's client_reference_id), one subscription with one item (Pro monthly or
yearly, or Team per seat, of Fixtures/plans/free-pro-team.yaml) in a realistic mix of statuses
(active, trialing, past_due with an invoice open for two days, canceling at period end, canceled, unpaid,
incomplete, paused), one user in seven an older canceled subscription too, three invoices with a
line each, a card, and for paying users active Stripe entitlements. Customer and subscription
rows carry the fixtures' full Stripe JSON (about 0.8 and 5 KB) as `raw`, so that the rows the
status reads touch have their real size; invoices carry a stand-in of --invoice-raw-bytes.

Usage: gen_api_ledger.py DATABASE USERS [--now UNIX_SECONDS] [--invoice-raw-bytes N]
"""
import argparse
import json
import os
import sqlite3
import time

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")

DAY = 86_400
STATUSES = (["active"] * 13) + ["trialing", "past_due", "canceling", "canceled", "unpaid", "incomplete", "paused"]
PRICES = [  # (price id, lookup key, product, unit amount, interval, quantity range)
    ("price_BenchProMonthly", "pro_monthly", "prod_BenchPro", 999, "month", (1, 1)),
    ("price_BenchProYearly", "pro_yearly", "prod_BenchPro", 9900, "year", (1, 1)),
    ("price_BenchTeamSeat", "team_seat_monthly", "prod_BenchTeam", 1200, "month", (2, 20)),
]


def fixture_text(name):
    with open(os.path.join(root, "Fixtures", "objects", name + ".json")) as f:
        return json.dumps(json.load(f), separators=(",", ":"))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("database")
    parser.add_argument("users", type=int)
    parser.add_argument("--now", type=int, default=int(time.time()))
    parser.add_argument("--invoice-raw-bytes", type=int, default=64)
    args = parser.parse_args()
    now, count = args.now, args.users

    customer_raw = fixture_text("customer")
    subscription_raw = fixture_text("subscription")
    customer_fixture_id = "cus_TqW7mZ2xLp9Kna"
    subscription_fixture_id = "sub_1Sx4kLHd3QfR8sTaV9pWm2cE"
    invoice_pad = "x" * max(0, args.invoice_raw_bytes - 48)

    db = sqlite3.connect(args.database)
    db.execute("PRAGMA synchronous = OFF")
    db.execute("BEGIN")
    version = "0, 0, ?, 0, 0, 'evt_bench'"  # vDeleted, vTerminal, vCreated, vTransition, vRank, vEventID

    customers, links, subscriptions, items, invoices, lines, methods, entitlements = [], [], [], [], [], [], [], []

    def flush():
        db.executemany(
            f"INSERT INTO customer (account, livemode, id, email, name, appUserID, currency, delinquent, defaultPaymentMethod, created, raw, vDeleted, vTerminal, vCreated, vTransition, vRank, vEventID) VALUES ('', 0, ?, ?, ?, ?, 'usd', 0, ?, ?, ?, {version})",
            customers)
        db.executemany("INSERT INTO userLink (account, livemode, appUserID, customer, source) VALUES ('', 0, ?, ?, 'checkout')", links)
        db.executemany(
            f"INSERT INTO subscription (account, livemode, id, customer, status, currency, cancelAtPeriodEnd, cancelAt, canceledAt, endedAt, trialStart, trialEnd, currentPeriodStart, currentPeriodEnd, startDate, collectionMethod, defaultPaymentMethod, latestInvoice, created, raw, vDeleted, vTerminal, vCreated, vTransition, vRank, vEventID) VALUES ('', 0, ?, ?, ?, 'usd', ?, ?, ?, ?, ?, ?, ?, ?, ?, 'charge_automatically', ?, ?, ?, ?, {version})",
            subscriptions)
        db.executemany(
            "INSERT INTO subscriptionItem (account, livemode, subscription, id, price, product, lookupKey, quantity, unitAmount, currency, interval, intervalCount, currentPeriodStart, currentPeriodEnd) VALUES ('', 0, ?, ?, ?, ?, ?, ?, ?, 'usd', ?, 1, ?, ?)",
            items)
        db.executemany(
            f"INSERT INTO invoice (account, livemode, id, number, customer, subscription, status, currency, subtotal, discount, tax, total, amountDue, amountPaid, amountRemaining, created, finalizedAt, paidAt, periodStart, periodEnd, billingReason, collectionMethod, hostedInvoiceURL, invoicePDF, attemptCount, raw, vDeleted, vTerminal, vCreated, vTransition, vRank, vEventID) VALUES ('', 0, ?, ?, ?, ?, ?, 'usd', ?, 0, 0, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'subscription_cycle', 'charge_automatically', ?, ?, 1, ?, {version})",
            invoices)
        db.executemany(
            "INSERT INTO invoiceLine (account, livemode, invoice, position, id, amount, currency, description, quantity, periodStart, periodEnd, price, subscription, proration) VALUES ('', 0, ?, 0, ?, ?, 'usd', ?, ?, ?, ?, ?, ?, 0)",
            lines)
        db.executemany(
            f"INSERT INTO paymentMethod (account, livemode, id, customer, type, brand, last4, expMonth, expYear, fingerprint, funding, country, created, vDeleted, vTerminal, vCreated, vTransition, vRank, vEventID) VALUES ('', 0, ?, ?, 'card', ?, ?, ?, ?, ?, 'credit', 'US', ?, {version})",
            methods)
        db.executemany("INSERT INTO activeEntitlement (account, livemode, customer, lookupKey, id, feature) VALUES ('', 0, ?, ?, ?, ?)", entitlements)
        for rows in (customers, links, subscriptions, items, invoices, lines, methods, entitlements):
            rows.clear()

    def subscription(sub, cus, status, price, quantity, created, start, end, latest, pm):
        cancel_at_period_end = status == "canceling"
        stripe_status = "active" if cancel_at_period_end else status
        cancel_at = end if cancel_at_period_end else None
        canceled_at = ended_at = None
        if status == "canceled":
            canceled_at = ended_at = start
        trial_start, trial_end = (start, end) if status == "trialing" else (None, None)
        raw = subscription_raw.replace(subscription_fixture_id, sub).replace(customer_fixture_id, cus)
        subscriptions.append((
            sub, cus, stripe_status, int(cancel_at_period_end), cancel_at, canceled_at, ended_at, trial_start, trial_end,
            start, end, created, pm, latest, created, raw, created))
        items.append((sub, "si_" + sub[4:], price[0], price[2], price[1], quantity, price[3], price[4], start, end))

    for index in range(count):
        user = f"user_{index}"
        cus, sub, pm = f"cus_Bench{index}", f"sub_Bench{index}", f"pm_Bench{index}"
        status = STATUSES[index % len(STATUSES)]
        price = PRICES[index % len(PRICES)]
        low, high = price[5]
        quantity = low + index % (high - low + 1)
        created = now - 400 * DAY + index % (300 * DAY)
        by_checkout = index % 10 == 9
        customers.append((
            cus, f"{user}@example.com", f"User {index}", None if by_checkout else user, pm, created,
            customer_raw.replace(customer_fixture_id, cus), created))
        if by_checkout:
            links.append((user, cus))
        start, end = now - 10 * DAY, now + 20 * DAY
        latest = f"in_Bench{index}_2"
        subscription(sub, cus, status, price, quantity, created, start, end, latest, pm)
        if index % 7 == 0:
            subscription(f"sub_BenchOld{index}", cus, "canceled", PRICES[0], 1, created - 200 * DAY,
                         created - 200 * DAY, created - 170 * DAY, None, None)
        for k in range(3):
            invoice = f"in_Bench{index}_{k}"
            open_invoice = k == 2 and status in ("past_due", "unpaid", "incomplete")
            total = price[3] * quantity
            # The latest invoice of a past_due subscription fell due two days ago: inside the grace period.
            issued = start - (2 - k) * 30 * DAY if k < 2 else (now - 2 * DAY if open_invoice else start)
            invoices.append((
                invoice, f"BENCH-{index}-{k}", cus, sub, "open" if open_invoice else "paid", total, total, total,
                0 if open_invoice else total, total if open_invoice else 0, issued, issued + 1,
                None if open_invoice else issued + 3, issued, issued, f"https://invoice.stripe.com/i/{invoice}",
                f"https://pay.stripe.com/invoice/{invoice}/pdf",
                '{"id":"%s","object":"invoice","pad":"%s"}' % (invoice, invoice_pad), issued))
            lines.append((invoice, f"il_{invoice}", total, f"{quantity} x {price[1]}", quantity, issued, issued + 30 * DAY, price[0], sub))
        methods.append((pm, cus, ["visa", "mastercard", "amex"][index % 3], f"{index % 10000:04d}", 1 + index % 12, 2027 + index % 5, f"fp{index}", created, created))
        if status in ("active", "trialing", "past_due", "canceling"):
            entitlements.append((cus, "export_csv", f"ent_{index}_a", "feat_export"))
            if price[1].startswith("team"):
                entitlements.append((cus, "shared_connections", f"ent_{index}_b", "feat_shared"))
        if len(customers) >= 5000:
            flush()
    flush()
    db.execute("COMMIT")
    db.execute("ANALYZE")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()


if __name__ == "__main__":
    main()
