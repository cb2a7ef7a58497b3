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
