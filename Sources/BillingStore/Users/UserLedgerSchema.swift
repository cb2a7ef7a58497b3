import GRDB

extension LedgerMigrations {
    /// Covering indexes for the service API's status reads (`UserLedger.billing`): a user's
    /// customers and their subscriptions are found without reading the rows themselves, which
    /// carry the objects' raw JSON (about 5 KB for a subscription). Halves the pages a status
    /// read touches (scripts/bench-api). The new subscription index starts with the columns of
    /// `subscription_customer`, which it replaces.
    static func registerServiceAPIMigrations(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("v3-service-api") { db in
            try db.execute(sql: """
                CREATE INDEX customer_appUser_scope
                    ON customer(account, livemode, appUserID, id, vDeleted, created, defaultPaymentMethod)
                    WHERE appUserID IS NOT NULL;
                CREATE INDEX subscription_customer_status
                    ON subscription(account, livemode, customer, id, status, currency, cancelAtPeriodEnd, cancelAt,
                        canceledAt, endedAt, trialStart, trialEnd, currentPeriodStart, currentPeriodEnd, created,
                        latestInvoice, defaultPaymentMethod);
                DROP INDEX subscription_customer;
                """)
        }
    }
}
