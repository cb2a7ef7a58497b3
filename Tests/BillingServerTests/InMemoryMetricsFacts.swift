import BillingCore
import BillingStore

/// Revenue metrics facts held in memory, for the metrics API's tests: each fact is kept with the
/// mode (Stripe) or environment (App Store) it belongs to, and read back only for that one, as
/// the SQLite and PostgreSQL fact stores do.
struct InMemoryMetricsFacts: MetricsFactStore {
    var stripe: [(livemode: Bool, facts: StripeSubscriptionFacts)] = []
    var appStore: [AppStoreSubscriptionFacts] = []
    /// Stripe's entries by mode; the App Store's by environment.
    var entries: [(livemode: Bool?, environment: String?, entry: RevenueEntry)] = []

    func stripeSubscriptions(scope: ServiceScope) async throws -> [StripeSubscriptionFacts] {
        stripe.filter { $0.livemode == scope.livemode && scope.account.isEmpty }.map(\.facts)
    }

    func appStoreSubscriptions(environments: [String]) async throws -> [AppStoreSubscriptionFacts] {
        appStore.filter { environments.contains($0.environment) }
    }

    func revenueEntries(scope: ServiceScope, appStoreEnvironments: [String], from: Int64, to: Int64) async throws -> [RevenueEntry] {
        entries.filter { tagged in
            guard from <= tagged.entry.at, tagged.entry.at < to else { return false }
            switch tagged.entry.store {
            case .stripe: return tagged.livemode == scope.livemode && scope.account.isEmpty
            case .appStore: return tagged.environment.map(appStoreEnvironments.contains) ?? false
            }
        }.map(\.entry)
    }
}

/// A fact store whose every read fails, as a ledger that cannot be read.
struct FailingMetricsFacts: MetricsFactStore {
    struct Failure: Error {}

    func stripeSubscriptions(scope: ServiceScope) async throws -> [StripeSubscriptionFacts] { throw Failure() }
    func appStoreSubscriptions(environments: [String]) async throws -> [AppStoreSubscriptionFacts] { throw Failure() }
    func revenueEntries(scope: ServiceScope, appStoreEnvironments: [String], from: Int64, to: Int64) async throws -> [RevenueEntry] {
        throw Failure()
    }
}
