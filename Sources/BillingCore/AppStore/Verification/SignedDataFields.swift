import Foundation

/// The few members of Apple's JWS headers and payloads that verification reads.
///
/// Tolerant like the rest of billingd's decoding: unknown members are ignored, and a member of
/// an unexpected type reads as absent (the check that needs it then says so), so that a field
/// Apple adds or retypes never makes a genuine delivery undecodable.
enum SignedDataFields {
    /// The JOSE header: `alg` and the `x5c` chain.
    struct Header: Decodable {
        let alg: String?
        let x5c: X5C

        enum X5C {
            case absent
            case strings([String])
            /// An array with `count` entries, not all strings.
            case malformed(count: Int)
            /// Present but not an array.
            case notAnArray
        }

        private enum CodingKeys: String, CodingKey { case alg, x5c }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            alg = container.lenient(String.self, .alg)
            if !container.contains(.x5c) || ((try? container.decodeNil(forKey: .x5c)) ?? false) {
                x5c = .absent
            } else if let strings = container.lenient([String].self, .x5c) {
                x5c = .strings(strings)
            } else if let anything = container.lenient([Ignored].self, .x5c) {
                x5c = .malformed(count: anything.count)
            } else {
                x5c = .notAnArray
            }
        }
    }

    /// A transaction (`JWSTransactionDecodedPayload`) or renewal info (`JWSRenewalInfoDecodedPayload`).
    struct SignedData: Decodable {
        let bundleId: String?
        let environment: String?
        let signedDate: Int64?

        private enum CodingKeys: String, CodingKey { case bundleId, environment, signedDate }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            bundleId = container.lenient(String.self, .bundleId)
            environment = container.lenient(String.self, .environment)
            signedDate = container.lenientMilliseconds(.signedDate)
        }
    }

    /// A Server Notifications V2 payload (`ResponseBodyV2DecodedPayload`).
    struct Notification: Decodable {
        let notificationType: String?
        let subtype: String?
        let notificationUUID: String?
        let signedDate: Int64?
        let data: AppData?
        let summary: AppData?
        let externalPurchaseToken: ExternalPurchaseToken?

        /// `data` and `summary` share the members read here.
        struct AppData: Decodable {
            let bundleId: String?
            let appAppleId: Int64?
            let environment: String?
            let signedTransactionInfo: String?
            let signedRenewalInfo: String?

            private enum CodingKeys: String, CodingKey {
                case bundleId, appAppleId, environment, signedTransactionInfo, signedRenewalInfo
            }

            init(from decoder: any Decoder) throws {
                let container = try decoder.container(keyedBy: CodingKeys.self)
                bundleId = container.lenient(String.self, .bundleId)
                appAppleId = container.lenient(Int64.self, .appAppleId)
                environment = container.lenient(String.self, .environment)
                signedTransactionInfo = container.lenient(String.self, .signedTransactionInfo)
                signedRenewalInfo = container.lenient(String.self, .signedRenewalInfo)
            }
        }

        struct ExternalPurchaseToken: Decodable {
            let bundleId: String?
            let appAppleId: Int64?
            let externalPurchaseId: String?

            private enum CodingKeys: String, CodingKey { case bundleId, appAppleId, externalPurchaseId }

            init(from decoder: any Decoder) throws {
                let container = try decoder.container(keyedBy: CodingKeys.self)
                bundleId = container.lenient(String.self, .bundleId)
                appAppleId = container.lenient(Int64.self, .appAppleId)
                externalPurchaseId = container.lenient(String.self, .externalPurchaseId)
            }
        }

        private enum CodingKeys: String, CodingKey {
            case notificationType, subtype, notificationUUID, signedDate, data, summary, externalPurchaseToken
        }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            notificationType = container.lenient(String.self, .notificationType)
            subtype = container.lenient(String.self, .subtype)
            notificationUUID = container.lenient(String.self, .notificationUUID)
            signedDate = container.lenientMilliseconds(.signedDate)
            data = container.lenient(AppData.self, .data)
            summary = container.lenient(AppData.self, .summary)
            externalPurchaseToken = container.lenient(ExternalPurchaseToken.self, .externalPurchaseToken)
        }
    }

    /// Any JSON value, skipped.
    private struct Ignored: Decodable {
        init(from decoder: any Decoder) throws {}
    }

    /// Decodes `bytes` as a JSON object of shape `T`; nil when it is not a JSON object.
    static func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) -> T? {
        try? JSONDecoder().decode(type, fromUntrusted: bytes)
    }
}

extension KeyedDecodingContainer {
    /// The member as `T`, or nil when it is absent, null or of another type.
    fileprivate func lenient<T: Decodable>(_ type: T.Type, _ key: Key) -> T? {
        (try? decodeIfPresent(type, forKey: key)) ?? nil
    }

    /// A Unix-milliseconds member: an integer, or a number with no fraction (1.7e12), else nil.
    fileprivate func lenientMilliseconds(_ key: Key) -> Int64? {
        if let integer = lenient(Int64.self, key) { return integer }
        if let number = lenient(Double.self, key) { return Int64(exactly: number) }
        return nil
    }
}
