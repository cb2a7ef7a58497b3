import BillingCore
import BillingStore
import BillingTestSupport
import Foundation
import Logging
import PostgresNIO
import Testing

/// The two implementations of the store protocols, for tests that must hold on both.
enum StoreBackend: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case sqlite
    case postgres

    var testDescription: String {
        switch self {
        case .sqlite: "SQLite"
        case .postgres: "PostgreSQL"
        }
    }
}

/// An inbox on a fresh store of one backend.
struct InboxUnderTest {
    let inbox: any EventInbox
    /// Fails every pending event for good, as an applier with one try would; how many.
    let failEveryPending: @Sendable () async throws -> Int
}

/// Runs `body` on an inbox of `backend` in a fresh store, closed afterwards.
func withInbox(_ backend: StoreBackend, _ body: (InboxUnderTest) async throws -> Void) async throws {
    switch backend {
    case .sqlite:
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("billingd-store-\(UUID().uuidString).sqlite3").path
        let database = try SQLiteDatabase.open(path: path)
        defer { try? database.close() }
        try await body(InboxUnderTest(
            inbox: SQLiteInbox(database: database),
            failEveryPending: { try await SQLiteApplier(database: database, configuration: .init(maximumAttempts: 1)).drain().dead }))
    case .postgres:
        try await PostgresTestDatabase.withStore { store in
            try await body(InboxUnderTest(
                inbox: store.inbox,
                failEveryPending: { try await store.applier(.init(maximumAttempts: 1)).drain().dead }))
        }
    }
}
