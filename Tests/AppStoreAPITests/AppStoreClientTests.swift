import APITransport
import AppStoreAPI
import BillingCore
import BillingSamples
import Crypto
import Foundation
import Synchronization
import Testing

@Suite("App Store Server API client: tokens")
struct AppStoreTokenTests {
    @Test("Every call carries an ES256 JWT with Apple's header and claims, signed by the .p8 key")
    func tokenShape() async throws {
        let fixture = try AppleClientFixture(answers: [answer(200, #"{"signedTransactionInfo":"\#(try AppleClientFixture(answers: []).signedTransaction())"}"#)])
        _ = try? await fixture.client.transactionInfo(transactionID: "2000000000000001")
        let token = try #require(fixture.transport.requests.first?.bearer)
        let header = jwtSegment(token, 0)
        let claims = jwtSegment(token, 1)
        #expect(header["alg"] as? String == "ES256")
        #expect(header["kid"] as? String == "2X9R4HXF34")
        #expect(header["typ"] as? String == "JWT")
        #expect(claims["iss"] as? String == "57246542-96fe-1a63-e053-0824d011072a")
        #expect(claims["aud"] as? String == "appstoreconnect-v1")
        #expect(claims["bid"] as? String == AppleClientFixture.bundleID)
        let iat = try #require(claims["iat"] as? Int)
        let exp = try #require(claims["exp"] as? Int)
        #expect(iat == 1_790_000_000)
        #expect(exp - iat == 300)
        let parts = token.split(separator: ".")
        var signature = String(parts[2]).replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while signature.count % 4 != 0 { signature += "=" }
        let raw = try #require(Data(base64Encoded: signature))
        #expect(raw.count == 64)
        let valid = fixture.key.publicKey.isValidSignature(
            try P256.Signing.ECDSASignature(rawRepresentation: raw), for: Data("\(parts[0]).\(parts[1])".utf8))
        #expect(valid)
    }

    @Test("A token is reused until a minute before it expires, then replaced")
    func tokenReuse() async throws {
        let empty = #"{"signedTransactions":[],"hasMore":false,"revision":"r1"}"#
        let fixture = try AppleClientFixture(answers: [answer(200, empty), answer(200, empty), answer(200, empty)])
        _ = try await fixture.client.transactionHistory(transactionID: "1")
        fixture.clock.withLock { $0 += 200 }
        _ = try await fixture.client.transactionHistory(transactionID: "1")
        fixture.clock.withLock { $0 += 50 }
        _ = try await fixture.client.transactionHistory(transactionID: "1")
        let tokens = fixture.transport.requests.compactMap(\.bearer)
        #expect(tokens.count == 3)
        #expect(tokens[0] == tokens[1])
        #expect(tokens[2] != tokens[1])
        #expect(jwtSegment(tokens[2], 1)["iat"] as? Int == 1_790_000_250)
    }
}

@Suite("App Store Server API client: errors and retries")
struct AppStoreRetryTests {
    @Test("429 is waited out for Retry-After, then the call succeeds")
    func rateLimitWaited() async throws {
        let fixture = try AppleClientFixture(answers: [
            answer(429, #"{"errorCode":4290000,"errorMessage":"Rate limit exceeded."}"#, headers: ["Retry-After": "3"]),
            answer(200, #"{"signedTransactions":[],"hasMore":false,"revision":"r"}"#),
        ])
        let page = try await fixture.client.transactionHistory(transactionID: "2000000000000001")
        #expect(page.transactions.isEmpty)
        #expect(fixture.sleeps.withLock { $0 } == [.seconds(3)])
        #expect(fixture.transport.requests.count == 2)
    }

    @Test("5xx and dropped connections are retried with backoff")
    func serverErrorsRetried() async throws {
        let fixture = try AppleClientFixture(answers: [
            answer(500, #"{"errorCode":5000000,"errorMessage":"An unknown error occurred."}"#),
            .failure(.connectionLost("connection reset")),
            answer(200, #"{"signedTransactions":[],"hasMore":false,"revision":"r"}"#),
        ])
        _ = try await fixture.client.transactionHistory(transactionID: "2000000000000001")
        #expect(fixture.transport.requests.count == 3)
        #expect(fixture.sleeps.withLock { $0 }.count == 2)
    }

    @Test("Apple's errorCode comes back typed and a 404 is not retried")
    func notFoundTyped() async throws {
        let fixture = try AppleClientFixture(answers: [answer(404, #"{"errorCode":4040010,"errorMessage":"Transaction id not found."}"#)])
        let error = await #expect(throws: AppStoreAPIError.self) {
            try await fixture.client.transactionInfo(transactionID: "2000000000000009")
        }
        #expect(error?.kind == .notFound)
        #expect(error?.errorCode == AppStoreAPIError.transactionIDNotFound)
        #expect(error?.route == "/inApps/v1/transactions/{transactionId}")
        #expect(fixture.transport.requests.count == 1)
    }

    @Test("A refused token is replaced once; the error names the settings and never holds the key or the token")
    func authenticationError() async throws {
        let fixture = try AppleClientFixture(answers: [answer(401, ""), answer(401, "")])
        let error = await #expect(throws: AppStoreAPIError.self) {
            try await fixture.client.transactionInfo(transactionID: "2000000000000001")
        }
        #expect(error?.kind == .authentication)
        #expect(fixture.transport.requests.count == 2)
        let text = error.map { "\($0)" } ?? ""
        #expect(text.contains("APPSTORE_KEY_ID"))
        let pem = fixture.key.pemRepresentation
        let keyBody = pem.split(separator: "\n").dropFirst().first.map(String.init) ?? pem
        #expect(!text.contains(keyBody))
        for token in fixture.transport.requests.compactMap(\.bearer) { #expect(!text.contains(token)) }
    }

    @Test("An id that could change the path is refused before any request")
    func hostileID() async throws {
        let fixture = try AppleClientFixture(answers: [])
        await #expect(throws: AppStoreAPIError.self) { try await fixture.client.transactionInfo(transactionID: "../../v1/notifications/test") }
        #expect(fixture.transport.requests.isEmpty)
    }
}

@Suite("App Store Server API client: signed answers")
struct AppStoreSignedAnswerTests {
    @Test("A transaction signed by the configured root is returned decoded")
    func verifiedTransaction() async throws {
        let pki = try AppStoreTestPKI()
        let signer = try AppleClientFixture(answers: [], pki: pki)
        let fixture = try AppleClientFixture(answers: [answer(200, #"{"signedTransactionInfo":"\#(signer.signedTransaction(id: "2000000000000002"))"}"#)], pki: pki)
        let signed = try await fixture.client.transactionInfo(transactionID: "2000000000000002")
        #expect(signed.transaction.transactionID == "2000000000000002")
        #expect(signed.transaction.expiresDate == 1_800_000_000_000)
    }

    @Test("An answer signed by another root, or for the other environment, is refused")
    func refusedAnswers() async throws {
        let pki = try AppStoreTestPKI()
        let stranger = try AppleClientFixture(answers: [])
        let own = try AppleClientFixture(answers: [], pki: pki)
        let fixture = try AppleClientFixture(answers: [
            answer(200, #"{"signedTransactionInfo":"\#(stranger.signedTransaction())"}"#),
            answer(200, #"{"signedTransactionInfo":"\#(own.signedTransaction(environment: "Production"))"}"#),
        ], pki: pki)
        for _ in 0..<2 {
            let error = await #expect(throws: AppStoreAPIError.self) { try await fixture.client.transactionInfo(transactionID: "2000000000000001") }
            #expect(error?.kind == .verification)
        }
    }

    @Test("Notification history pages follow paginationToken and send the date range")
    func notificationHistoryPaging() async throws {
        let pki = try AppStoreTestPKI()
        let signer = try AppleClientFixture(answers: [], pki: pki)
        let first = #"{"notificationHistory":[{"signedPayload":"\#(signer.signedNotification(uuid: "a1"))","sendAttempts":[{"attemptDate":1790000000000,"sendAttemptResult":"NO_RESPONSE"}]}],"hasMore":true,"paginationToken":"page+2"}"#
        let second = #"{"notificationHistory":[{"signedPayload":"\#(signer.signedNotification(uuid: "b2"))","sendAttempts":[{"attemptDate":1790000000000,"sendAttemptResult":"SUCCESS"}]}],"hasMore":false}"#
        let fixture = try AppleClientFixture(answers: [answer(200, first), answer(200, second)], pki: pki)
        let page1 = try await fixture.client.notificationHistory(startDate: 1_780_000_000_000, endDate: 1_790_000_000_000)
        #expect(page1.notifications.map(\.verified.notificationUUID) == ["a1"])
        #expect(page1.notifications.first?.wasDelivered == false)
        #expect(page1.hasMore)
        let page2 = try await fixture.client.notificationHistory(
            startDate: 1_780_000_000_000, endDate: 1_790_000_000_000, paginationToken: page1.paginationToken)
        #expect(page2.notifications.first?.wasDelivered == true)
        let requests = fixture.transport.requests
        #expect(requests[1].url == "https://apple.test/inApps/v1/notifications/history?paginationToken=page%2B2")
        let body = try JSONSerialization.jsonObject(with: Data(requests[0].body)) as? [String: Any]
        #expect(body?["startDate"] as? Int64 == 1_780_000_000_000)
        #expect(body?["endDate"] as? Int64 == 1_790_000_000_000)
        #expect(requests[0].header("Content-Type") == "application/json")
    }
}

@Suite("App Store key file")
struct AppStoreSigningKeyTests {
    @Test("A .p8 readable by others is refused with the chmod that fixes it; a private one loads")
    func permissions() throws {
        let key = P256.Signing.PrivateKey()
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("AuthKey_\(UUID().uuidString).p8").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        #expect(FileManager.default.createFile(atPath: path, contents: Data(key.pemRepresentation.utf8), attributes: [.posixPermissions: 0o644]))
        let error = #expect(throws: AppStoreSigningKey.LoadError.self) { try AppStoreSigningKey.load(path: path) }
        #expect(error?.message.contains("chmod 600 \(path)") == true)
        #expect(error?.message.contains(key.pemRepresentation) == false)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
        #expect(try AppStoreSigningKey.load(path: path).publicKey.rawRepresentation == key.publicKey.rawRepresentation)
    }

    @Test("A file that is not a P-256 PKCS#8 key is refused without echoing it")
    func notAKey() throws {
        let error = #expect(throws: AppStoreSigningKey.LoadError.self) { try AppStoreSigningKey.parse(pem: "-----BEGIN PRIVATE KEY-----\nc2VjcmV0\n-----END PRIVATE KEY-----\n") }
        #expect(error?.message.contains("c2VjcmV0") == false)
    }
}
