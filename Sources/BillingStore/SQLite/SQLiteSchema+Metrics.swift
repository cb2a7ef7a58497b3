import BillingCore
import Foundation
import GRDB

extension SQLiteMigrations {
    /// What the revenue metrics read besides the ledger: each Stripe subscription snapshot as an
    /// insert-only fact, refunds, and what ties an invoice to the charge that paid it. Existing
    /// ledgers gain them, their subscription facts rebuilt from the inbox (``MetricsFactRows/Backfill``)
    /// and their invoices' charges read from the JSON they keep.
    static func registerMetricsMigrations(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("v9-metrics") { db in
            try db.execute(sql: """
                -- One row per event (or reconcile fetch) that carried a subscription, whether it won
                -- the version guard or not: what the subscription was from vCreated on. Insert-only;
                -- replay rebuilds the events' rows and keeps the fetches'.
                CREATE TABLE stripeSubscriptionFact (
                    account TEXT NOT NULL, livemode BOOLEAN NOT NULL, subscription TEXT NOT NULL, vEventID TEXT NOT NULL,
                    vDeleted BOOLEAN NOT NULL, vTerminal BOOLEAN NOT NULL, vCreated INTEGER NOT NULL, vTransition INTEGER NOT NULL,
                    vRank INTEGER NOT NULL, status TEXT NOT NULL, currency TEXT,
                    monthlyCurrency TEXT, monthlyNumerator INTEGER, monthlyDenominator INTEGER,
                    trialStart INTEGER, trialEnd INTEGER, price TEXT, lookupKey TEXT, product TEXT,
                    PRIMARY KEY (account, livemode, subscription, vEventID)
                ) WITHOUT ROWID;

                -- Each refund's newest snapshot (refund.*, charge.refund.updated); a ledger table.
                CREATE TABLE stripeRefund (
                    account TEXT NOT NULL, livemode BOOLEAN NOT NULL, id TEXT NOT NULL,
                    amount INTEGER NOT NULL, currency TEXT NOT NULL, charge TEXT, paymentIntent TEXT, status TEXT, created INTEGER,
                    vCreated INTEGER NOT NULL, vRank INTEGER NOT NULL, vEventID TEXT NOT NULL,
                    PRIMARY KEY (account, livemode, id)
                ) WITHOUT ROWID;
                -- Which paid invoice a refund undoes: by the charge or payment intent it names.
                CREATE INDEX stripeRefund_charge ON stripeRefund (account, livemode, charge);
                CREATE INDEX stripeRefund_paymentIntent ON stripeRefund (account, livemode, paymentIntent);
                CREATE INDEX invoicePayment_invoice ON invoicePayment (account, livemode, invoice);

                -- What paid an invoice: on the invoice before API 2025-03-31, on its payments after.
                ALTER TABLE invoice ADD COLUMN charge TEXT;
                ALTER TABLE invoice ADD COLUMN paymentIntent TEXT;
                ALTER TABLE invoicePayment ADD COLUMN charge TEXT;
                ALTER TABLE invoicePayment ADD COLUMN paymentIntent TEXT;
                UPDATE invoice SET
                    charge = COALESCE(json_extract(CAST(raw AS TEXT), '$.charge.id'), json_extract(CAST(raw AS TEXT), '$.charge')),
                    paymentIntent = COALESCE(
                        json_extract(CAST(raw AS TEXT), '$.payment_intent.id'), json_extract(CAST(raw AS TEXT), '$.payment_intent'))
                WHERE json_valid(CAST(raw AS TEXT));
                UPDATE invoicePayment SET
                    charge = COALESCE(
                        json_extract(CAST(raw AS TEXT), '$.payment.charge.id'), json_extract(CAST(raw AS TEXT), '$.payment.charge')),
                    paymentIntent = COALESCE(
                        json_extract(CAST(raw AS TEXT), '$.payment.payment_intent.id'),
                        json_extract(CAST(raw AS TEXT), '$.payment.payment_intent'))
                WHERE json_valid(CAST(raw AS TEXT));
                """)
            let insert = try db.makeStatement(sql: MetricsFactRows.insertSubscriptionFactSQL)
            let events = try Row.fetchCursor(
                db, sql: MetricsFactRows.Backfill.eventsSQL, arguments: [InboxStatus.applied.rawValue, MetricsFactRows.Backfill.eventTypePattern])
            while let row = try events.next() {
                let body: [UInt8] = Array(row[5] as Data)
                if let fact = MetricsFactRows.Backfill.fact(
                    eventID: row[0], account: row[1], livemode: row[2], type: row[3], created: row[4], body: body)
                {
                    try insert.execute(arguments: StatementArguments(fact.map(\.databaseValue)))
                }
            }
            let fetched = try Row.fetchCursor(db, sql: MetricsFactRows.Backfill.fetchedRowsSQL)
            while let row = try fetched.next() {
                let version = SnapshotVersion(
                    deleted: row[3], terminal: row[4], eventCreated: row[5], transitionAt: row[6], statusRank: row[7], eventID: row[8])
                if let fact = MetricsFactRows.Backfill.fact(account: row[0], livemode: row[1], raw: Array(row[2] as Data), version: version) {
                    try insert.execute(arguments: StatementArguments(fact.map(\.databaseValue)))
                }
            }
        }
    }
}
