import BillingCore
import Foundation
import GRDB
import Testing

@testable import BillingStore

@Suite("InboxAccount: the inbox's account column as a type over the same text")
struct InboxAccountTests {
    @Test("Each kind of column value reads as its account and renders back byte for byte", arguments: [
        ("", InboxAccount.stripe(connected: nil)),
        ("acct_1NvZ5kQ9RKHgCVdK", .stripe(connected: "acct_1NvZ5kQ9RKHgCVdK")),
        ("appstore:Sandbox", .appStore(.sandbox)),
        ("appstore:Production", .appStore(.production)),
        ("appstore:Xcode", .appStore(.xcode)),
        ("appstore:LocalTesting", .appStore(.localTesting)),
        ("appstore:SomethingApple2027", .appStore(AppStoreEnvironment(rawValue: "SomethingApple2027"))),
    ] as [(String, InboxAccount)])
    func roundTrip(column: String, account: InboxAccount) {
        #expect(InboxAccount(column: column) == account)
        #expect(account.column == column)
        #expect(Array(InboxAccount(column: column).column.utf8) == Array(column.utf8))
    }

    @Test("Only App Store rows name an environment; the writers' key is the environment's name")
    func environments() {
        #expect(InboxAccount(column: "appstore:Sandbox").appStoreEnvironment == .sandbox)
        #expect(InboxAccount(column: "").appStoreEnvironment == nil)
        #expect(InboxAccount(column: "acct_1").appStoreEnvironment == nil)
        #expect(AppStoreDelivery.environment(inboxAccount: "appstore:Production") == "Production")
    }

    @Test("Every account the fixture ledger written by an older billingd holds reads and renders back the same")
    func fixtureLedgerColumns() throws {
        // A copy: the fixture is in WAL mode, and opening it where it lies would leave files beside it.
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("inbox-account-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("ledger.sqlite3").path
        try FileManager.default.copyItem(atPath: LedgerFixtures.sqlite.path, toPath: path)
        let ledger = try DatabaseQueue(path: path)
        let columns = try ledger.read { db in try String.fetchAll(db, sql: "SELECT DISTINCT account FROM inboxEvent ORDER BY account") }
        #expect(columns == ["", "appstore:Sandbox"])
        for column in columns {
            #expect(InboxAccount(column: column).column == column)
        }
        #expect(InboxAccount(column: "appstore:Sandbox") == .appStore(.sandbox))
    }

    @Test("The inbox rows of App Store data carry their environment's account")
    func appStoreDeliveries() throws {
        let body = AppStoreFactory.notification(
            "SUBSCRIBED", "INITIAL_BUY", original: "11", transaction: "11", purchase: AppStoreFactory.t0,
            expires: AppStoreFactory.t0 + AppStoreFactory.day, signed: AppStoreFactory.t0, environment: .production)
        let delivery = try AppStoreFactory.delivery(body)
        #expect(delivery.envelope.account == "appstore:Production")
        #expect(delivery.envelope.livemode)
    }
}
