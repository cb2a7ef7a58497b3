import AppStoreFake
import Crypto
import Foundation
import Testing

@Suite("Bearer token: checked like Apple, refused with 401 and an empty body")
struct BearerTokenTests {
    @Test("a token billingd would sign is accepted")
    func validTokenIsAccepted() async throws {
        let key = APIKey()
        try await withFake(key: key) { fake, client in
            let purchase = try await fake.subscribe(productID: "pro.monthly")
            let answer = try await client.get("/inApps/v1/subscriptions/\(purchase.transactionID)")
            #expect(answer.status == 200)
            #expect(await fake.acceptedTokenCount == 1)
            #expect(await fake.refusedTokens.isEmpty)
            let recorded = try #require(await fake.requests.last)
            #expect(recorded.path == "/inApps/v1/subscriptions/\(purchase.transactionID)")
            #expect(recorded.bearerToken?.split(separator: ".").count == 3)
            #expect(recorded.tokenRefusal == nil)
        }
    }

    /// A bad token and the reason the fake must give for refusing it.
    struct Refusal: CustomTestStringConvertible, Sendable {
        let name: String
        let reason: AppStoreFake.TokenRefusal
        let authorization: @Sendable (APIKey) -> String

        var testDescription: String { name }
    }

    static let refusals: [Refusal] = {
        let now = Int64(Date().timeIntervalSince1970)
        func changed(_ change: @escaping @Sendable (inout APIKey.Token) -> Void) -> @Sendable (APIKey) -> String {
            { key in
                var token = key.token(now: now)
                change(&token)
                return "Bearer " + key.sign(token)
            }
        }
        return [
            Refusal(name: "no Authorization header value", reason: .missing) { _ in "" },
            Refusal(name: "Basic instead of Bearer", reason: .missing) { _ in "Basic dXNlcjpwYXNz" },
            Refusal(name: "not a JWS", reason: .malformed) { _ in "Bearer not-a-token" },
            Refusal(name: "alg HS256", reason: .alg, authorization: changed { $0.alg = "HS256" }),
            Refusal(name: "another key id", reason: .kid, authorization: changed { $0.kid = "OTHERKEY99" }),
            Refusal(name: "no typ", reason: .typ, authorization: changed { $0.typ = nil }),
            Refusal(name: "tampered claims", reason: .signature) { key in
                let parts = key.sign(key.token(now: now)).split(separator: ".").map(String.init)
                var forged = key.token(now: now)
                forged.bid = "com.example.other"
                let forgedClaims = key.sign(forged).split(separator: ".")[1]
                return "Bearer \(parts[0]).\(forgedClaims).\(parts[2])"
            },
            Refusal(name: "signed by another key", reason: .signature) { key in
                var other = APIKey()
                other.keyID = key.keyID
                return "Bearer " + other.sign(key.token(now: now))
            },
            Refusal(name: "DER-encoded signature", reason: .signature) { key in
                let token = key.sign(key.token(now: now))
                let input = token.split(separator: ".").prefix(2).joined(separator: ".")
                let der = Array((try! key.privateKey.signature(for: Array(input.utf8))).derRepresentation)
                return "Bearer " + key.sign(key.token(now: now), signature: der)
            },
            Refusal(name: "another issuer", reason: .iss, authorization: changed { $0.iss = "someone-else" }),
            Refusal(name: "wrong audience", reason: .aud, authorization: changed { $0.aud = "appstoreconnect-v2" }),
            Refusal(name: "another bundle id", reason: .bid, authorization: changed { $0.bid = "com.example.other" }),
            Refusal(name: "no bundle id", reason: .bid, authorization: changed { $0.bid = nil }),
            Refusal(name: "issued in the future", reason: .iat, authorization: changed {
                $0.iat = now + 600
                $0.exp = now + 1200
            }),
            Refusal(name: "expired", reason: .exp, authorization: changed {
                $0.iat = now - 1300
                $0.exp = now - 100
            }),
            Refusal(name: "longer than an hour", reason: .lifetime, authorization: changed { $0.exp = now + 7200 }),
        ]
    }()

    @Test("a bad token is refused", arguments: refusals)
    func badTokenIsRefused(_ refusal: Refusal) async throws {
        let key = APIKey()
        try await withFake(key: key) { fake, client in
            let purchase = try await fake.subscribe(productID: "pro.monthly")
            var refused = client
            refused.authorization = refusal.authorization(key)
            let answer = try await refused.get("/inApps/v1/transactions/\(purchase.transactionID)")
            #expect(answer.status == 401)
            #expect(answer.body.isEmpty)
            #expect(await fake.refusedTokens == [refusal.reason])
            #expect(await fake.requests.last?.tokenRefusal == refusal.reason)
            #expect(await fake.acceptedTokenCount == 0)
        }
    }

    @Test("an unknown path answers 404 without a body, once authenticated")
    func unknownPath() async throws {
        try await withFake { _, client in
            let answer = try await client.get("/inApps/v9/nothing")
            #expect(answer.status == 404)
            #expect(answer.body.isEmpty)
        }
    }
}
