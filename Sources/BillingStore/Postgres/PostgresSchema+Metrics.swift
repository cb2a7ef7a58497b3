import BillingCore
import Foundation
import Logging
import PostgresNIO

extension PostgresSchema {
    /// What the revenue metrics read besides the ledger (see SQLite/SQLiteSchema+Metrics.swift):
    /// each Stripe subscription snapshot as an insert-only fact, refunds, and what ties an invoice
    /// to the charge that paid it, read for existing rows from the JSON they keep.
    static let metrics = [
        """
        CREATE TABLE stripeSubscriptionFact (
            account text NOT NULL, livemode boolean NOT NULL, subscription text NOT NULL, vEventID text NOT NULL,
            vDeleted boolean NOT NULL, vTerminal boolean NOT NULL, vCreated bigint NOT NULL, vTransition bigint NOT NULL,
            vRank bigint NOT NULL, status text NOT NULL, currency text,
            monthlyCurrency text, monthlyNumerator bigint, monthlyDenominator bigint,
            trialStart bigint, trialEnd bigint, price text, lookupKey text, product text,
            PRIMARY KEY (account, livemode, subscription, vEventID)
        )
        """,
        """
        CREATE TABLE stripeRefund (
            account text NOT NULL, livemode boolean NOT NULL, id text NOT NULL,
            amount bigint NOT NULL, currency text NOT NULL, charge text, paymentIntent text, status text, created bigint,
            vCreated bigint NOT NULL, vRank bigint NOT NULL, vEventID text NOT NULL,
            PRIMARY KEY (account, livemode, id)
        )
        """,
        // Which paid invoice a refund undoes: by the charge or payment intent it names.
        "CREATE INDEX stripeRefund_charge ON stripeRefund (account, livemode, charge)",
        "CREATE INDEX stripeRefund_paymentIntent ON stripeRefund (account, livemode, paymentIntent)",
        "CREATE INDEX invoicePayment_invoice ON invoicePayment (account, livemode, invoice)",
        "ALTER TABLE invoice ADD COLUMN charge text",
        "ALTER TABLE invoice ADD COLUMN paymentIntent text",
        "ALTER TABLE invoicePayment ADD COLUMN charge text",
        "ALTER TABLE invoicePayment ADD COLUMN paymentIntent text",
        // A reference is an id, or the object when expanded. Read as json, not jsonb: jsonb refuses
        // a \u0000 that a customer's metadata may hold, and one such row would stop the migration;
        // json only refuses it in a value taken out as text, and these are ids.
        """
        UPDATE invoice SET
            charge = COALESCE(convert_from(raw, 'UTF8')::json -> 'charge' ->> 'id', convert_from(raw, 'UTF8')::json ->> 'charge'),
            paymentIntent = COALESCE(
                convert_from(raw, 'UTF8')::json -> 'payment_intent' ->> 'id', convert_from(raw, 'UTF8')::json ->> 'payment_intent')
        WHERE position('"charge"' in convert_from(raw, 'UTF8')) > 0 OR position('"payment_intent"' in convert_from(raw, 'UTF8')) > 0
        """,
        """
        UPDATE invoicePayment SET
            charge = COALESCE(
                convert_from(raw, 'UTF8')::json -> 'payment' -> 'charge' ->> 'id', convert_from(raw, 'UTF8')::json -> 'payment' ->> 'charge'),
            paymentIntent = COALESCE(
                convert_from(raw, 'UTF8')::json -> 'payment' -> 'payment_intent' ->> 'id',
                convert_from(raw, 'UTF8')::json -> 'payment' ->> 'payment_intent')
        WHERE position('"payment"' in convert_from(raw, 'UTF8')) > 0
        """,
    ]
}

extension PostgresMigrations {
    /// The metrics' tables, and the subscription facts of an existing ledger rebuilt from its
    /// inbox and its fetched rows (``MetricsFactRows/Backfill``), in the migration's transaction.
    static let metricsMigration = Migration(version: "v7-metrics", statements: PostgresSchema.metrics) { connection, logger in
        var facts: [[LedgerValue]] = []
        let events = try await connection.runOnce(
            MetricsFactRows.Backfill.eventsSQL,
            [.text(InboxStatus.applied.rawValue), .text(MetricsFactRows.Backfill.eventTypePattern)], logger: logger)
        for try await row in events {
            let (eventID, account, livemode, type, created, body) = try row.decode((String, String, Bool, String, Int64, ByteBuffer).self)
            if let fact = MetricsFactRows.Backfill.fact(
                eventID: eventID, account: account, livemode: livemode, type: type, created: created, body: Array(buffer: body))
            {
                facts.append(fact)
            }
        }
        let fetched = try await connection.runOnce(MetricsFactRows.Backfill.fetchedRowsSQL, [], logger: logger)
        for try await row in fetched {
            let (account, livemode, raw, deleted, terminal, created, transition, rank, eventID) =
                try row.decode((String, Bool, ByteBuffer, Bool, Bool, Int64, Int64, Int, String).self)
            let version = SnapshotVersion(
                deleted: deleted, terminal: terminal, eventCreated: created, transitionAt: transition, statusRank: rank, eventID: eventID)
            if let fact = MetricsFactRows.Backfill.fact(account: account, livemode: livemode, raw: Array(buffer: raw), version: version) {
                facts.append(fact)
            }
        }
        for fact in facts { try await connection.runOnce(MetricsFactRows.insertSubscriptionFactSQL, fact, logger: logger) }
    }
}
