import BillingCore
import BillingStore
import Foundation

/// The report of one App Store reconcile run: notifications recovered from Get Notification
/// History, and subscriptions checked against Get All Subscription Statuses with their drift by
/// kind. `--json` prints it; the run record keeps it.
public struct AppStoreReconcileReport: Sendable, Codable {
    public struct NotificationsReport: Sendable, Codable {
        /// Notifications Get Notification History listed in the window.
        public var listed = 0
        /// Listed notifications the inbox lacked, now stored (or, in a dry run, that would be).
        public var recovered = 0
        /// Of those, how many Apple never delivered (no `SUCCESS` send attempt).
        public var neverDelivered = 0
        /// Recovered notifications applied in this process (the CLI; `serve`'s applier otherwise).
        public var applied = 0
        /// The window walked, Unix seconds.
        public var from: Int64 = 0
        public var to: Int64 = 0
        public var warning: String?

        enum CodingKeys: String, CodingKey {
            case listed, recovered, neverDelivered = "never_delivered", applied, from, to, warning
        }
    }

    /// One subscription whose ledger state differed from Apple's.
    public struct Drift: Sendable, Codable {
        public var originalTransactionID: String
        /// `missing`, `status_differs` or `expiry_differs`.
        public var kind: String
        /// Why it was checked (see ``AppStoreStaleReason``).
        public var reason: String
        public var ledgerStatus: String?
        public var appleStatus: String
        public var ledgerExpiresDate: Int64?
        public var appleExpiresDate: Int64?

        enum CodingKeys: String, CodingKey {
            case originalTransactionID = "original_transaction_id", kind, reason, ledgerStatus = "ledger_status"
            case appleStatus = "apple_status", ledgerExpiresDate = "ledger_expires_date", appleExpiresDate = "apple_expires_date"
        }
    }

    public struct SubscriptionsReport: Sendable, Codable {
        /// Original transactions the ledger might hold stale state for, by reason.
        public var candidates: [String: Int] = [:]
        /// Subscriptions Apple reported on (a purchase family can hold several).
        public var checked = 0
        public var matched = 0
        /// Apple knows a subscription the ledger does not.
        public var missing = 0
        public var statusDiffers = 0
        public var expiryDiffers = 0
        public var repaired = 0
        /// Apple's answer was older than what the ledger held: kept.
        public var keptNewer = 0
        public var examples: [Drift] = []

        public var drift: Int { missing + statusDiffers + expiryDiffers }

        enum CodingKeys: String, CodingKey {
            case candidates, checked, matched, missing, statusDiffers = "status_differs", expiryDiffers = "expiry_differs"
            case repaired, keptNewer = "kept_newer", examples
        }
    }

    public var runID: Int64 = 0
    public var mode = ""
    public var environment = ""
    public var dryRun = false
    public var startedAt: Int64 = 0
    public var finishedAt: Int64?
    public var outcome = "running"
    public var error: String?
    public var notifications = NotificationsReport()
    public var subscriptions = SubscriptionsReport()
    /// Requests sent to the App Store Server API (pages and lookups; retries not counted).
    public var requests = 0

    public var totalDrift: Int { subscriptions.drift }

    enum CodingKeys: String, CodingKey {
        case runID = "run_id", mode, environment, dryRun = "dry_run", startedAt = "started_at", finishedAt = "finished_at"
        case outcome, error, notifications, subscriptions, requests
    }

    /// A few lines for a terminal.
    public var summary: String {
        var lines: [String] = []
        let seconds = (finishedAt ?? startedAt) - startedAt
        lines.append(
            "App Store reconcile \(environment) run \(runID) \(outcome)\(dryRun ? " (dry run: nothing changed)" : "") in \(seconds) s, \(requests) requests")
        lines.append(
            "  notifications: \(notifications.listed) listed since \(UTCTimestamp.string(notifications.from)), \(notifications.recovered) recovered (\(notifications.neverDelivered) Apple never delivered), \(notifications.applied) applied")
        if let warning = notifications.warning { lines.append("  warning: \(warning)") }
        let reasons = subscriptions.candidates.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", ")
        lines.append("  subscriptions checked: \(subscriptions.checked)\(reasons.isEmpty ? "" : " (candidates: \(reasons))"), \(subscriptions.matched) matched")
        lines.append(
            "  drift: \(subscriptions.missing) missing, \(subscriptions.statusDiffers) status differs, \(subscriptions.expiryDiffers) expiry differs; \(subscriptions.repaired) repaired, \(subscriptions.keptNewer) kept newer")
        for example in subscriptions.examples {
            var line = "    \(example.kind) \(example.originalTransactionID) (\(example.reason)): ledger \(example.ledgerStatus ?? "none")"
            if let expires = example.ledgerExpiresDate { line += " until \(UTCTimestamp.string(expires / 1000))" }
            line += ", Apple \(example.appleStatus)"
            if let expires = example.appleExpiresDate { line += " until \(UTCTimestamp.string(expires / 1000))" }
            lines.append(line)
        }
        if let error { lines.append("  error: \(error)") }
        return lines.joined(separator: "\n")
    }
}
