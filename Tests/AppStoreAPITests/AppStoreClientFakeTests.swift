import APITransport
import AppStoreAPI
import AppStoreFake
import BillingCore
import BillingSamples
import Crypto
import Foundation
import Testing

@Suite("App Store Server API client against AppStoreFake over libcurl")
struct AppStoreClientFakeTests {
    @Test("The fake accepts billingd's JWT; lookup by order id, statuses and history come back verified; a 429 is waited out")
    func endToEnd() async throws {
        let key = P256.Signing.PrivateKey()
        let fake = try await AppStoreFake.start(.init(
            issuerID: "57246542-96fe-1a63-e053-0824d011072a", keyID: "2X9R4HXF34", bundleID: "com.example.app", publicKey: key.publicKey,
            environment: .sandbox, appAppleID: 1_234_567_890))
        defer { Task { await fake.stop() } }
        let verifier = try AppStoreVerifier(.init(
            bundleID: "com.example.app", appAppleID: 1_234_567_890, environments: [.sandbox], rootCertificates: [fake.pki.rootDER]))
        let client = AppStoreClient(
            configuration: AppStoreClientConfiguration(
                issuerID: "57246542-96fe-1a63-e053-0824d011072a", keyID: "2X9R4HXF34", privateKey: key, bundleID: "com.example.app",
                environment: .sandbox, baseURL: fake.baseURL, retryBaseDelay: .milliseconds(10)),
            verifier: verifier, transport: CurlTransport(maxConnections: 2))

        let purchase = try await fake.subscribe(productID: "com.example.pro.monthly")
        let lookup = try await client.lookUpOrder(orderID: purchase.orderID)
        #expect(lookup.isValid)
        #expect(lookup.transactions.map(\.transaction.transactionID).contains(purchase.transactionID))

        await fake.inject(.status(429, retryAfter: 1), times: 1, matching: .path("/inApps/v1/subscriptions"))
        let statuses = try await client.subscriptionStatuses(transactionID: purchase.transactionID)
        #expect(statuses.map(\.originalTransactionID) == [purchase.originalTransactionID])
        #expect(statuses.first?.status == 1)

        let history = try await client.completeTransactionHistory(transactionID: purchase.originalTransactionID)
        #expect(history.first?.transaction.transactionID == purchase.transactionID)
        #expect(await fake.refusedTokens.isEmpty)
    }

    @Test("Send Consumption Information: a PUT of the body with the JSON content type, 202 back; a 503 is retried; Apple's 400 names its code")
    func sendConsumptionInformation() async throws {
        let key = P256.Signing.PrivateKey()
        let fake = try await AppStoreFake.start(.init(
            issuerID: "57246542-96fe-1a63-e053-0824d011072a", keyID: "2X9R4HXF34", bundleID: "com.example.app", publicKey: key.publicKey,
            environment: .sandbox))
        defer { Task { await fake.stop() } }
        let verifier = try AppStoreVerifier(.init(bundleID: "com.example.app", environments: [.sandbox], rootCertificates: [fake.pki.rootDER]))
        let client = AppStoreClient(
            configuration: AppStoreClientConfiguration(
                issuerID: "57246542-96fe-1a63-e053-0824d011072a", keyID: "2X9R4HXF34", privateKey: key, bundleID: "com.example.app",
                environment: .sandbox, baseURL: fake.baseURL, retryBaseDelay: .milliseconds(5)),
            verifier: verifier, transport: CurlTransport(maxConnections: 2))
        let purchase = try await fake.subscribe(productID: "com.example.pro.monthly")
        let body = ConsumptionInformation(customerConsented: true, deliveryStatus: .delivered, sampleContentProvided: true, refundPreference: .decline)

        await fake.inject(.status(503), times: 1, matching: .path("/inApps/v2/transactions/consumption", method: "PUT"))
        #expect(try await client.sendConsumptionInformation(transactionID: purchase.transactionID, body: body) == 202)
        let puts = await fake.requests(matching: .path("/inApps/v2/transactions/consumption/\(purchase.transactionID)", method: "PUT"))
        #expect(puts.count == 2, "the 503 was retried")
        #expect(puts.last?.header("content-type") == "application/json")
        #expect(puts.last?.body == body.json())
        #expect(await fake.consumptionAnswers.map(\.transactionID) == [purchase.transactionID])

        var refused = body
        refused.customerConsented = false
        let error = await #expect(throws: AppStoreAPIError.self) {
            try await client.sendConsumptionInformation(transactionID: purchase.transactionID, body: refused)
        }
        #expect(error?.kind == .invalidRequest && error?.status == 400 && error?.errorCode == 4_000_035)
        #expect(error?.route == "/inApps/v2/transactions/consumption/{transactionId}", "no transaction id in the error")
        let malformed = await #expect(throws: AppStoreAPIError.self) { try await client.sendConsumptionInformation(transactionID: "..", body: body) }
        #expect(malformed?.kind == .invalidRequest && malformed?.attempts == 0)
        #expect(await fake.consumptionAnswers.count == 1)
    }

    @Test("A token signed with another key is refused with 401, and the error says what to check")
    func wrongKeyRefused() async throws {
        let fake = try await AppStoreFake.start(.init(
            issuerID: "57246542-96fe-1a63-e053-0824d011072a", keyID: "2X9R4HXF34", bundleID: "com.example.app",
            publicKey: P256.Signing.PrivateKey().publicKey, environment: .sandbox))
        defer { Task { await fake.stop() } }
        let verifier = try AppStoreVerifier(.init(bundleID: "com.example.app", environments: [.sandbox], rootCertificates: [fake.pki.rootDER]))
        let client = AppStoreClient(
            configuration: AppStoreClientConfiguration(
                issuerID: "57246542-96fe-1a63-e053-0824d011072a", keyID: "2X9R4HXF34", privateKey: P256.Signing.PrivateKey(),
                bundleID: "com.example.app", environment: .sandbox, baseURL: fake.baseURL),
            verifier: verifier, transport: CurlTransport(maxConnections: 1))
        let error = await #expect(throws: AppStoreAPIError.self) { try await client.transactionInfo(transactionID: "2000000000000001") }
        #expect(error?.kind == .authentication)
        #expect(await fake.refusedTokens.contains(.signature))
    }
}
