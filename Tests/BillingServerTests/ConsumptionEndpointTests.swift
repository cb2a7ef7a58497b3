import BillingCore
import BillingSamples
import BillingServer
import BillingStore
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

@Suite("Service API: PUT and GET /v1/users/{user}/appstore/consumption-consent")
struct ConsumptionConsentEndpointTests {
    static let path = "/v1/users/user_1/appstore/consumption-consent"

    func put(_ client: some TestClientProtocol, _ body: String, path: String = path, headers: HTTPFields = jsonHeaders) async throws -> TestResponse {
        try await client.execute(uri: path, method: .put, headers: headers, body: ByteBuffer(string: body))
    }

    @Test("Never recorded: not consented, no time; then each PUT is kept with its time, per user")
    func recorded() async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        try await userApplication(ledger, catalog: .freeOnly, now: 1_770_000_000).test(.router) { client in
            let never = try await client.execute(uri: Self.path, method: .get, headers: authorized)
            #expect(never.status == .ok && never.text == #"{"consented":false,"updated_at":null}"#, "\(never.text)")

            let given = try await put(client, #"{"consented": true}"#)
            #expect(given.status == .ok && given.text == #"{"consented":true,"updated_at":1770000000}"#, "\(given.text)")
            #expect(try await client.execute(uri: Self.path, method: .get, headers: authorized).text == given.text)

            let withdrawn = try await put(client, #"{"consented": false}"#)
            #expect(withdrawn.json["consented"] as? Bool == false)
            #expect(try await client.execute(uri: Self.path, method: .get, headers: authorized).json["consented"] as? Bool == false)

            let other = try await client.execute(uri: "/v1/users/user%202/appstore/consumption-consent", method: .get, headers: authorized)
            #expect(other.json["consented"] as? Bool == false && other.json["updated_at"] is NSNull)
        }
        #expect(try await ledger.store.appStoreConsumption.consent(of: "user_1") == ConsumptionConsent(consented: false, updatedAt: 1_770_000_000))
    }

    @Test("Bad requests get a JSON 4xx that says what to send", arguments: [
        ("not JSON", "consented=true", 400, "invalid_body"),
        ("a string", #"{"consented": "true"}"#, 400, "invalid_field"),
        ("a number", #"{"consented": 1}"#, 400, "invalid_field"),
        ("null", #"{"consented": null}"#, 400, "invalid_field"),
        ("missing", "{}", 400, "missing_field"),
        ("an unknown member", #"{"consented": true, "scope": "all"}"#, 400, "unknown_field"),
        ("a repeated member", #"{"consented": true, "consented": false}"#, 400, "duplicate_field"),
        ("an array", "[true]", 400, "invalid_body"),
    ])
    func badRequests(_ name: String, _ body: String, status: Int, code: String) async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        try await userApplication(ledger, catalog: .freeOnly).test(.router) { client in
            let response = try await put(client, body)
            #expect(Int(response.status.code) == status, "\(name): \(response.text)")
            #expect(response.errorCode == code, "\(name): \(response.text)")
            #expect(response.headers[.contentType]?.hasPrefix("application/json") == true)
        }
        #expect(try await ledger.store.appStoreConsumption.consent(of: "user_1") == nil, "nothing recorded")
    }

    @Test("The service API's token is required; the body must be JSON; the user id is checked")
    func refusals() async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        try await userApplication(ledger, catalog: .freeOnly).test(.router) { client in
            #expect(try await put(client, #"{"consented": true}"#, headers: [.contentType: "application/json"]).status == .unauthorized)
            #expect(try await client.execute(uri: Self.path, method: .get).status == .unauthorized)
            let plain = try await put(client, #"{"consented": true}"#, headers: [.authorization: "Bearer \(userAPIToken)", .contentType: "text/plain"])
            #expect(plain.status == .unsupportedMediaType && plain.errorCode == "unsupported_media_type")
            let control = try await put(client, #"{"consented": true}"#, path: "/v1/users/a%0Ab/appstore/consumption-consent")
            #expect(control.status == .badRequest && control.errorCode == "invalid_user")
            #expect(try await client.execute(uri: Self.path, method: .post, headers: jsonHeaders, body: ByteBuffer(string: "{}")).status == .methodNotAllowed)
        }
    }
}

@Suite("A refund request through POST /webhooks/appstore: recorded once, in the timeline and in `billingd appstore consumption list`")
struct ConsumptionRequestEndpointTests {
    /// A signed CONSUMPTION_REQUEST for `user_42`'s purchase, posted twice as Apple's retry would.
    static func received(_ bed: AppStoreTestbed, _ ledger: TemporaryLedger) async throws -> AppStoreSampleNotification {
        let token = try await ledger.store.appStore.accountToken(for: "user_42")
        let sample = bed.sample("CONSUMPTION_REQUEST", original: "2000000000000042", token: token)
        let body = bed.body(sample)
        let (uuid, transaction) = (sample.notificationUUID, sample.transaction["transactionId"] as? String ?? "")
        try await bed.application(ledger, catalog: try fixtureCatalog("free-pro-enterprise")).test(.router) { client in
            for _ in 0..<2 {
                let response = try await client.execute(uri: "/webhooks/appstore", method: .post, body: ByteBuffer(bytes: body))
                #expect(response.status == .ok, "\(response.text)")
            }
            let timeline = try await client.execute(uri: "/v1/users/user_42/timeline", method: .get, headers: authorized)
            #expect(timeline.status == .ok, "\(timeline.text)")
            let items = try #require(timeline.json["data"] as? [[String: Any]])
            let item = try #require(items.first { $0["kind"] as? String == "appstore.consumption_request" }, "\(timeline.text)")
            #expect(item["source"] as? String == "app_store" && item["ref"] as? String == uuid)
            #expect(item["summary"] as? String == "Refund request (UNINTENDED_PURCHASE) for transaction \(transaction): waiting to be answered")
        }
        return sample
    }

    @Test("Apple's retry of the notification records no second request")
    func once() async throws {
        let bed = try AppStoreTestbed()
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        let sample = try await Self.received(bed, ledger)
        let requests = try await ledger.store.appStoreConsumption.requests(status: nil, limit: 10)
        #expect(requests.map(\.notificationUUID) == [sample.notificationUUID])
        #expect(requests.first?.user == "user_42" && requests.first?.status == .pending)
    }

    @Test("`billingd appstore consumption list` shows requests as a table, as JSON, and by status; a status it does not know is exit 64", .needsBillingdBinary)
    func list() async throws {
        let bed = try AppStoreTestbed()
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        let sample = try await Self.received(bed, ledger)
        let transaction = try #require(sample.transaction["transactionId"] as? String)
        let answer = ConsumptionInformation(
            customerConsented: true, deliveryStatus: .delivered, sampleContentProvided: false, refundPreference: .grantFull)
        try await ledger.store.appStoreConsumption.record(
            .attempting(body: answer.json(), user: "user_42"), environment: "Sandbox", notificationUUID: sample.notificationUUID, at: bed.now)
        try await ledger.store.appStoreConsumption.record(
            .sent(appleStatus: 202), environment: "Sandbox", notificationUUID: sample.notificationUUID, at: bed.now + 1)
        let environment = ["BILLINGD_DATABASE": ledger.directory.appendingPathComponent("ledger.sqlite3").path]

        let json = try await billingd(["appstore", "consumption", "list", "--json"], environment: environment)
        #expect(json.status == 0, "\(json.stderr)")
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]], "\(json.stdout)")
        #expect(rows.count == 1)
        let row = try #require(rows.first)
        #expect(row["notification_uuid"] as? String == sample.notificationUUID && row["transaction_id"] as? String == transaction)
        #expect(row["original_transaction_id"] as? String == "2000000000000042" && row["environment"] as? String == "Sandbox")
        #expect(row["user"] as? String == "user_42" && row["status"] as? String == "sent" && row["attempts"] as? Int == 1)
        #expect(row["apple_status"] as? Int == 202 && row["reason"] as? String == "UNINTENDED_PURCHASE")
        #expect(row["deadline"] as? Int == Int(sample.signedDate + 12 * 3_600_000) && row["last_error"] is NSNull)
        let body = try #require(row["body"] as? [String: Any])
        #expect(body["refundPreference"] as? String == "GRANT_FULL" && body["customerConsented"] as? Bool == true)

        let table = try await billingd(["appstore", "consumption"], environment: environment)
        #expect(table.status == 0, "\(table.stderr)")
        #expect(table.stdout.hasPrefix("notification"), "\(table.stdout)")
        #expect(table.stdout.contains(sample.notificationUUID) && table.stdout.contains("DELIVERED, refund preference GRANT_FULL"), "\(table.stdout)")

        let failed = try await billingd(["appstore", "consumption", "list", "--status", "failed"], environment: environment)
        #expect(failed.status == 0 && failed.stdout.contains("No refund requests with status failed."), "\(failed.stdout)")
        let nonsense = try await billingd(["appstore", "consumption", "list", "--status", "answered"], environment: environment)
        #expect(nonsense.status == 64, "\(nonsense.stderr)")
    }

    @Test("serve refuses to start with an APPSTORE_REFUND_PREFERENCE it does not know, naming the values it takes", .needsBillingdBinary)
    func badSettingRefused() async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        let result = try await billingd(
            ["serve"],
            environment: [
                "BILLINGD_DATABASE": ledger.directory.appendingPathComponent("ledger.sqlite3").path, "STRIPE_WEBHOOK_SECRET": testSecret,
                "BILLINGD_PORT": "0", "APPSTORE_REFUND_PREFERENCE": "by_usage:50,10",
            ])
        #expect(result.status == 78, "\(result.stderr)")
        #expect(result.stderr.contains("APPSTORE_REFUND_PREFERENCE=by_usage:50,10 is not valid"), "\(result.stderr)")
        #expect(result.stderr.contains("none") && result.stderr.contains("grant_prorated") && result.stderr.contains("by_usage:FULL,PRORATED"), "\(result.stderr)")
    }
}
