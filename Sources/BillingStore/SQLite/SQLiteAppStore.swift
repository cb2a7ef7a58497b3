import BillingCore
import Foundation
import GRDB

/// The SQLite ``AppStoreLedgerStore``: the App Store side of the ledger as the service API uses it:
/// transactions the app forwards (recorded and applied before the answer), appAccountTokens, and a
/// user's purchases.
public struct SQLiteAppStore: AppStoreLedgerStore {
    let database: SQLiteDatabase

    public init(database: SQLiteDatabase) {
        self.database = database
    }

    /// Records verified transactions the app forwarded for their users, in one transaction:
    /// each becomes an inbox row (so that replay rebuilds it) applied at once, and its original
    /// transaction is tied to the user, unless another user owns it under the `keep` rule.
    public func record(_ reports: [AppStoreAppTransaction], receivedAt: Int64) async throws -> [AppStoreReportOutcome] {
        let outbox = database.outbox
        return try await database.writer.write { db in
            var outcomes: [AppStoreReportOutcome] = []
            var touches = OutboxTouches()
            for report in reports {
                let transaction = report.transaction
                let environment = transaction.environment ?? AppStoreEnvironment.production.rawValue
                let original = transaction.originalTransactionID
                if report.ownership == .keep, let owner = try SQLiteAppStoreWriter.owner(environment: environment, original: original, db: db),
                    owner != report.user
                {
                    outcomes.append(.ownedByOtherUser(originalTransactionID: original))
                    continue
                }
                let delivery = InboxDelivery.appStoreReport(report, environment: environment, receivedAt: receivedAt)
                let now = Int64(Date().timeIntervalSince1970 * 1000)
                switch try SQLiteInbox.insert([delivery], status: .applied, db: db)[0] {
                case .stored(let seq):
                    let effect = try SQLiteAppStoreWriter.apply(
                        .app(report), environment: environment, sourceID: report.eventID, receivedAt: now, db: db)
                    try SQLiteInbox.recordApplied(seq: seq, effect: effect, at: now, db: db)
                    touches.add(.app(report), environment: environment)
                    outcomes.append(.recorded(originalTransactionID: original, duplicate: false))
                case .duplicate:
                    outcomes.append(.recorded(originalTransactionID: original, duplicate: true))
                }
            }
            if let outbox { try SQLiteOutbox.announce(touches, policy: outbox, now: Int64(Date().timeIntervalSince1970 * 1000), db: db) }
            return outcomes
        }
    }

    /// The user's appAccountToken (see ``AppAccountToken``), remembered so that notifications
    /// carrying it are tied to the user; purchases made with it before it was remembered (on a
    /// device that never reached the app's backend) are tied now.
    public func accountToken(for user: String) async throws -> String {
        let outbox = database.outbox
        return try await database.writer.write { db in
            var namespace = try String.fetchOne(db, sql: "SELECT value FROM meta WHERE key = ?", arguments: [AppAccountToken.namespaceKey])
            if namespace == nil {
                var generator = SystemRandomNumberGenerator()
                let fresh = AppAccountToken.format((0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) })
                try db.execute(sql: "INSERT INTO meta (key, value) VALUES (?, ?)", arguments: [AppAccountToken.namespaceKey, fresh])
                namespace = fresh
            }
            let bytes = AppAccountToken.uuidBytes(namespace!)
            let token = AppAccountToken.derive(user: user, namespace: bytes)
            try db.cachedStatement(sql: "INSERT OR IGNORE INTO appStoreAccountToken (token, appUserID) VALUES (?, ?)")
                .execute(arguments: [token, user])
            if db.changesCount > 0 {
                try db.cachedStatement(sql: """
                    INSERT OR IGNORE INTO appStoreOwner (environment, originalTransactionID, appUserID, source, sourceID)
                    SELECT environment, originalTransactionID, ?, 'account_token', appAccountToken
                    FROM appStoreSubscription WHERE appAccountToken = ?
                    """).execute(arguments: [user, token])
                // Purchases tied just now may change the user's view, in either mode.
                if db.changesCount > 0, let outbox {
                    var touches = OutboxTouches()
                    touches.users = [.init(scope: .test, user: user), .init(scope: ServiceScope(livemode: true), user: user)]
                    try SQLiteOutbox.announce(touches, policy: outbox, now: Int64(Date().timeIntervalSince1970 * 1000), db: db)
                }
            }
            return token
        }
    }

    /// The purchase an original transaction belongs to, and its owner; nil when unknown.
    public func subscription(environment: String, originalTransactionID: String) async throws -> (AppStoreSubscriptionRecord, owner: String?)? {
        try await database.writer.read { db in
            guard let record = try SQLiteAppStore.record(environment: environment, original: originalTransactionID, db: db) else {
                return nil
            }
            return (record, try SQLiteAppStoreWriter.owner(environment: environment, original: originalTransactionID, db: db))
        }
    }

    public func originalTransactionIDs(_ originalTransactionIDs: [String], ownedBy user: String, environment: String) async throws -> Set<String> {
        // One read over the owner's index: a user holds few purchases, a receipt may name many.
        let owned = try await database.writer.read { db in
            try String.fetchSet(db.cachedStatement(sql: AppStoreLedgerRows.ownedOriginalsSQL), arguments: [user, environment])
        }
        return owned.intersection(originalTransactionIDs)
    }

    public func introductoryOffers(of user: String, livemode: Bool) async throws -> [AppStoreIntroductoryOffer] {
        try await database.writer.read { db in
            var offers: [AppStoreIntroductoryOffer] = []
            try SQLiteColumns.forEachRow(db.cachedStatement(sql: AppStoreLedgerRows.introductoryOffersSQL(livemode: livemode)), arguments: [user]) { row in
                if let offer = AppStoreLedgerRows.introductoryOffer(from: row) { offers.append(offer) }
            }
            return offers
        }
    }
}
