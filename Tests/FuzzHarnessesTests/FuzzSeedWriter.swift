import BillingCore
import BillingSamples
import Foundation
import Testing

/// Writes `Fixtures/fuzz-seeds/`, the seeds that no other fixture provides: signed Stripe
/// deliveries, whole events, list pages, App Store data signed with the fuzz test PKI, receipts,
/// usage bodies and form descriptions, each `valid-*` or `bad-*` as Fuzz/seeds.tsv expects.
/// Run it after changing it: `BILLINGD_WRITE_FUZZ_SEEDS=1 swift test --filter FuzzSeedWriter`.
@Suite("FuzzSeedWriter", .enabled(if: ProcessInfo.processInfo.environment["BILLINGD_WRITE_FUZZ_SEEDS"] == "1"))
struct FuzzSeedWriter {
    /// SignatureTarget's secrets.
    static let secrets = ["whsec_fuzz_current", "whsec_fuzz_rotated"]
    static let signedAt: Int64 = 1_767_225_600

    @Test("Writes Fixtures/fuzz-seeds")
    func write() throws {
        let seeds = FuzzCorpus.root.appendingPathComponent("Fixtures/fuzz-seeds")
        var written: [String: [UInt8]] = [:]
        for (name, bytes) in try signature() { written["signature/\(name)"] = bytes }
        for (name, bytes) in events() { written["event-envelope/\(name)"] = bytes }
        for (name, bytes) in try lists() { written["stripe-list/\(name)"] = bytes }
        for (name, bytes) in forms() { written["stripe-form/\(name)"] = bytes }
        for (name, bytes) in plans() { written["plan-catalog/\(name)"] = bytes }
        for (name, bytes) in try appStoreJWS() { written["appstore-jws/\(name)"] = bytes }
        for (name, bytes) in receipts() { written["appstore-receipt/\(name)"] = bytes }
        for (name, bytes) in usage() { written["usage-body/\(name)"] = bytes }
        for (path, bytes) in written {
            let file = seeds.appendingPathComponent(path)
            try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
            try Data(bytes).write(to: file)
        }
        #expect(written.count > 40)
    }

    // MARK: - Stripe

    func event(_ type: String, id: String, account: String? = nil) -> [UInt8] {
        SampleEvent.body(type: type, eventID: id, created: Self.signedAt - 5, apiVersion: "2025-08-27.basil", livemode: false, account: account)
    }

    func signature() throws -> [(String, [UInt8])] {
        let body = event("customer.subscription.updated", id: "evt_sig_1")
        let good = SignatureVerifier.signatureHex(body: body, secret: Self.secrets[0], timestamp: Self.signedAt)
        let rotated = SignatureVerifier.signatureHex(body: body, secret: Self.secrets[1], timestamp: Self.signedAt)
        let other = SignatureVerifier.signatureHex(body: body, secret: "whsec_someone_else", timestamp: Self.signedAt)
        func delivery(_ header: String, _ body: [UInt8] = body) -> [UInt8] { Array(header.utf8) + [0x0A] + body }
        return [
            ("valid-one-v1", delivery("t=\(Self.signedAt),v1=\(good)")),
            ("valid-rotated", delivery("t=\(Self.signedAt),v1=\(other),v1=\(rotated)")),
            ("valid-v0-and-unknown-keys", delivery(" t=\(Self.signedAt) , v0=abc, v1=\(good.uppercased()), scheme=x")),
            (
                "valid-empty-body",
                delivery("t=\(Self.signedAt),v1=\(SignatureVerifier.signatureHex(body: [], secret: Self.secrets[0], timestamp: Self.signedAt))", [])
            ),
            ("bad-other-secret", delivery("t=\(Self.signedAt),v1=\(other)")),
            ("bad-no-timestamp", delivery("v1=\(good)")),
            ("bad-two-timestamps", delivery("t=\(Self.signedAt),t=\(Self.signedAt),v1=\(good)")),
            ("bad-short-v1", delivery("t=\(Self.signedAt),v1=\(good.prefix(62))")),
            ("bad-timestamp-not-digits", delivery("t=+\(Self.signedAt),v1=\(good)")),
            ("bad-pair-without-equals", delivery("t=\(Self.signedAt),v1")),
        ]
    }

    func events() -> [(String, [UInt8])] {
        let types = [
            "customer.created", "customer.deleted", "customer.subscription.updated", "customer.subscription.deleted",
            "invoice.paid", "invoice.upcoming", "invoice_payment.paid", "payment_method.attached", "payment_method.detached",
            "price.created", "product.updated", "checkout.session.completed", "entitlements.active_entitlement_summary.updated",
            "charge.succeeded",
        ]
        var seeds = types.enumerated().map { index, type in ("valid-\(type)", event(type, id: "evt_seed_\(index)")) }
        seeds.append(("valid-connect-account", event("customer.updated", id: "evt_seed_connect", account: "acct_1Seed")))
        let customer = event("customer.updated", id: "evt_seed_bad")
        seeds.append(("bad-byte-order-mark", [0xEF, 0xBB, 0xBF] + customer))
        seeds.append(("bad-not-json", Array("evt_seed customer.updated".utf8)))
        seeds.append(("bad-no-data", Array(#"{"id":"evt_1","object":"event","type":"customer.updated","created":1,"livemode":false}"#.utf8)))
        seeds.append((
            "bad-data-twice",
            Array(#"{"id":"evt_1","object":"event","type":"customer.updated","created":1,"data":{"object":{"id":"cus_1"}},"data":{"object":{"id":"cus_2"}}}"#.utf8)
        ))
        seeds.append((
            "bad-nul-in-id",
            Array(#"{"id":"evt_nul\u0000x","object":"event","type":"customer.updated","created":1,"data":{"object":{"id":"cus_1","object":"customer"}}}"#.utf8)
        ))
        seeds.append((
            "bad-negative-created",
            Array(#"{"id":"evt_1","object":"event","type":"customer.updated","created":-1,"data":{"object":{"id":"cus_1","object":"customer"}}}"#.utf8)
        ))
        return seeds
    }

    func lists() throws -> [(String, [UInt8])] {
        let objects = try ["customer", "price", "product", "subscription", "invoice"].map {
            String(decoding: try Data(contentsOf: FuzzCorpus.root.appendingPathComponent("Fixtures/objects/\($0).json")), as: UTF8.self)
        }
        func list(_ elements: [String], hasMore: Bool, extra: String = "") -> [UInt8] {
            Array(#"{"object":"list","data":[\#(elements.joined(separator: ","))],"has_more":\#(hasMore),"url":"/v1/things"\#(extra)}"#.utf8)
        }
        return [
            ("valid-customers", list([objects[0]], hasMore: true)),
            ("valid-mixed-page", list(Array(objects.prefix(3)), hasMore: false)),
            ("valid-subscriptions-invoices", list(Array(objects.suffix(2)), hasMore: true)),
            ("valid-empty", list([], hasMore: false)),
            ("valid-search", list([objects[0]], hasMore: true, extra: #","next_page":"WzE2OTk5NDQwMDBd","total_count":null"#)),
            ("bad-data-not-array", Array(#"{"object":"list","data":{"id":"cus_1"},"has_more":false}"#.utf8)),
            ("bad-trailing-bytes", list([objects[0]], hasMore: false) + Array(" }".utf8)),
            ("bad-no-data", Array(#"{"object":"list","has_more":false}"#.utf8)),
            ("bad-element-not-object", Array(#"{"object":"list","data":["cus_1"],"has_more":false}"#.utf8)),
        ]
    }

    /// Form descriptions: deterministic pseudo-random bytes, which the form target reads as
    /// nested parameters (every description is a valid one).
    func forms() -> [(String, [UInt8])] {
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        return (1...8).map { index in
            var bytes: [UInt8] = []
            for _ in 0..<(24 * index) {
                state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                bytes.append(UInt8(truncatingIfNeeded: state >> 33))
            }
            return ("valid-\(index)", bytes)
        }
    }

    func plans() -> [(String, [UInt8])] {
        [
            ("bad-unclosed-flow", Array("tiers: [\n  {id: free, name: Free, rank: 0\n".utf8)),
            ("bad-duplicate-key", Array("tiers:\n  - id: free\n    id: pro\n    name: Free\n    rank: 0\n".utf8)),
            ("bad-no-default-tier", Array("tiers:\n  - id: pro\n    name: Pro\n    rank: 1\n".utf8)),
            ("bad-anchor-alias", Array("base: &b {id: free, name: Free, rank: 0}\ntiers: [*b, *b]\n".utf8)),
        ]
    }

    // MARK: - App Store

    func appStoreJWS() throws -> [(String, [UInt8])] {
        let pem = try String(contentsOf: FuzzCorpus.root.appendingPathComponent("Fixtures/appstore/fuzz-test-pki.pem"), encoding: .utf8)
        let pki = try AppStoreTestPKI(serialized: pem)
        func fixture(_ name: String, _ changes: [String: Any] = [:]) throws -> [UInt8] {
            var object = try #require(
                JSONSerialization.jsonObject(with: Data(contentsOf: FuzzCorpus.root.appendingPathComponent("Fixtures/appstore/\(name).json")))
                    as? [String: Any])
            for (key, value) in changes {
                let path = key.split(separator: ".").map(String.init)
                if path.count == 2, var inner = object[path[0]] as? [String: Any] {
                    inner[path[1]] = value
                    object[path[0]] = inner
                } else {
                    object[key] = value
                }
            }
            return Array(try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]))
        }
        let transaction = pki.sign(payload: try fixture("transaction"))
        let renewal = pki.sign(payload: try fixture("renewal_info"))
        let notification = pki.sign(
            payload: try fixture("notification", ["data.signedTransactionInfo": transaction, "data.signedRenewalInfo": renewal]))
        let xcode = pki.sign(payload: try fixture("transaction", ["environment": "Xcode"]))
        let tampered = String(transaction.dropLast(4)) + (transaction.hasSuffix("AAAA") ? "BBBB" : "AAAA")
        return [
            ("valid-transaction.jws", Array(transaction.utf8)),
            ("valid-renewal-info.jws", Array(renewal.utf8)),
            ("valid-notification.jws", Array(notification.utf8)),
            ("valid-notification-summary.jws", Array(pki.sign(payload: try fixture("notification_summary")).utf8)),
            ("valid-notification-external-purchase-token.jws", Array(pki.sign(payload: try fixture("notification_external_purchase_token")).utf8)),
            ("valid-xcode-transaction.jws", Array(xcode.utf8)),
            ("bad-tampered-signature.jws", Array(tampered.utf8)),
            // A transaction of another app would still verify as renewal info, which names no bundle.
            ("bad-other-bundle.jws", Array(pki.sign(payload: try fixture("notification", ["data.bundleId": "com.example.other"])).utf8)),
            (
                "bad-hs256.jws",
                Array(pki.sign(payload: try fixture("transaction"), header: pki.header(alg: "HS256"), signature: .hmacSHA256(key: Array("k".utf8))).utf8)
            ),
            ("bad-two-segments.jws", Array(transaction.split(separator: ".").prefix(2).joined(separator: ".").utf8)),
        ]
    }

    func receipts() -> [(String, [UInt8])] {
        let purchases = [
            AppStoreReceipt.InAppPurchase(
                transactionID: "2000000812345678", originalTransactionID: "2000000812345678", productID: "com.example.radar.pro.monthly",
                purchaseDate: 1_767_225_600_000, originalPurchaseDate: 1_767_225_600_000, expiresDate: 1_769_904_000_000),
            AppStoreReceipt.InAppPurchase(
                transactionID: "2000000812345679", originalTransactionID: "2000000812345678", productID: "com.example.radar.pro.monthly",
                purchaseDate: 1_769_904_000_000, originalPurchaseDate: 1_767_225_600_000, expiresDate: 1_772_323_200_000,
                cancellationDate: 1_770_000_000_000),
            AppStoreReceipt.InAppPurchase(transactionID: "2000000812345680", originalTransactionID: nil, productID: "com.example.radar.lifetime"),
        ]
        let der = AppStoreSampleReceipt.make(bundleID: "com.example.radar", inApp: purchases)
        let ber = AppStoreSampleReceipt.make(bundleID: "com.example.radar", inApp: purchases, receiptType: "Xcode", indefiniteLength: true)
        return [
            ("valid-der", der),
            ("valid-ber-xcode", ber),
            ("valid-no-purchases", AppStoreSampleReceipt.make(bundleID: "com.example.radar", inApp: [])),
            ("bad-truncated-der", Array(der.prefix(der.count / 2))),
            ("bad-not-pkcs7", [0x30, 0x03, 0x02, 0x01, 0x01]),
        ]
    }

    // MARK: - Usage

    func usage() -> [(String, [UInt8])] {
        let now = Self.signedAt
        return [
            ("valid-event", #"{"quantity": 3, "idempotency_key": "radar_42"}"#),
            ("valid-event-with-timestamp", #"{"quantity": 1, "idempotency_key": "radar_43", "timestamp": \#(now - 3600)}"#),
            ("valid-gauge", #"{"value": 12}"#),
            (
                "valid-batch",
                #"{"events": [{"user": "u_1", "meter": "radars", "quantity": 2, "idempotency_key": "k1", "timestamp": \#(now)}, {"user": "u_2", "meter": "radars", "quantity": 1, "idempotency_key": "k2"}]}"#
            ),
            ("bad-zero-quantity", #"{"quantity": 0, "idempotency_key": "radar_44"}"#),
            ("bad-unknown-field", #"{"quantity": 1, "idempotency_key": "radar_45", "note": "x"}"#),
            ("bad-quantity-string", #"{"quantity": "1", "idempotency_key": "radar_46"}"#),
            ("bad-timestamp-old", #"{"quantity": 1, "idempotency_key": "radar_47", "timestamp": 1}"#),
            ("bad-not-object", #"[{"quantity": 1}]"#),
            ("bad-key-control-character", #"{"quantity": 1, "idempotency_key": "a\u0007b"}"#),
        ].map { ($0.0, Array($0.1.utf8)) }
    }
}
