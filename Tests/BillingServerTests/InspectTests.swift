import BillingStore
import Foundation
import Testing

@Suite("billingd inspect")
struct InspectTests {
    @Test("The ledger's view uses the API's snake_case keys and true/false for booleans (issue 17 item 11)")
    func snakeCaseAndBooleans() async throws {
        var builder = UserLedgerBuilder()
        builder.add("customer.created", UserFixtures.customer("cus_inspect", user: "user_inspect"))
        builder.add("customer.subscription.created", UserFixtures.subscription("sub_inspect", customer: "cus_inspect", status: "active"))
        let ledger = try await builder.ledger()
        defer { ledger.remove() }
        let maintenance = SQLiteMaintenance(database: ledger.database)

        let customer = try #require(try await maintenance.inspect(id: "cus_inspect")?["object"] as? [String: any Sendable])
        #expect(customer["app_user_id"] as? String == "user_inspect")
        #expect(customer["v_deleted"] as? Bool == false)
        #expect(customer["livemode"] as? Bool == false)
        #expect(customer["appUserID"] == nil)

        let view = try #require(try await maintenance.inspect(id: "sub_inspect"))
        let subscription = try #require(view["object"] as? [String: any Sendable])
        #expect(subscription["cancel_at_period_end"] as? Bool == false)
        #expect(subscription["current_period_end"] as? Int64 != nil || subscription["current_period_end"] is LedgerJSON)
        let items = try #require(subscription["items"] as? [[String: any Sendable]])
        #expect(items.first?["lookup_key"] as? String == "pro_monthly")
        let events = try #require(view["events"] as? [[String: any Sendable]])
        #expect(events.first?["event_id"] as? String != nil)
    }
}
