import BillingCore

// Deleted when the store side of issue 32 merges: it adds `metrics` to LedgerStore, kept by both
// backends. Until then every read says so, and nothing else relies on this file.

extension LedgerStore {
    /// The revenue metrics' facts: not kept by this build's backends yet.
    public var metrics: any MetricsFactStore { MetricsFactsNotKept() }
}

/// Answers every read with ``MetricsFactsNotKeptError``.
struct MetricsFactsNotKept: MetricsFactStore {
    func stripeSubscriptions(scope: ServiceScope) async throws -> [StripeSubscriptionFacts] { throw MetricsFactsNotKeptError() }
    func appStoreSubscriptions(environments: [String]) async throws -> [AppStoreSubscriptionFacts] { throw MetricsFactsNotKeptError() }
    func revenueEntries(scope: ServiceScope, appStoreEnvironments: [String], from: Int64, to: Int64) async throws -> [RevenueEntry] {
        throw MetricsFactsNotKeptError()
    }
}

/// The ledger of this build keeps no revenue metrics facts.
public struct MetricsFactsNotKeptError: Error, CustomStringConvertible {
    public var description: String {
        "this build's ledger keeps no revenue metrics facts yet (the SQLite and PostgreSQL fact stores of issue 32 are not merged)"
    }
}
