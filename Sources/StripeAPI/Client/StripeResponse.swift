import APITransport
import Foundation

/// A successful (2xx) answer from Stripe, body untouched.
public struct StripeResponse: Sendable {
    public let status: Int
    public let body: [UInt8]
    /// All headers, names lowercased.
    public let headers: [String: String]
    /// The `Request-Id` header: quote it to Stripe support.
    public let requestID: String?
    /// The `Date` header as Unix seconds: Stripe's clock, nil when absent or unparseable.
    public let date: Int64?
    /// The idempotency key that was sent (POST only).
    public let idempotencyKey: String?
    public let method: HTTPTransportMethod
    /// The request path without query.
    public let path: String

    public init(
        status: Int, body: [UInt8], headers: [String: String] = [:], idempotencyKey: String? = nil,
        method: HTTPTransportMethod = .get, path: String = "/"
    ) {
        self.status = status
        self.body = body
        self.headers = Dictionary(headers.map { ($0.key.lowercased(), $0.value) }) { first, _ in first }
        self.requestID = self.headers["request-id"]
        self.date = self.headers["date"].flatMap(HTTPDate.unixSeconds)
        self.idempotencyKey = idempotencyKey
        self.method = method
        self.path = path
    }

    /// Decodes the body with a plain `JSONDecoder` (Stripe's snake_case names spelled out in the
    /// type's coding keys); a body that does not fit throws `.decoding`.
    public func decode<T: Decodable>(_ type: T.Type) throws(StripeError) -> T {
        do {
            return try JSONDecoder().decode(type, from: Data(body))
        } catch {
            throw StripeError(
                kind: .decoding, status: status, message: "the answer is not a valid \(T.self): \(Self.describe(error))",
                requestID: requestID, method: method, path: path
            )
        }
    }

    /// A short account of a decoding failure, naming the member that did not fit.
    static func describe(_ error: any Error) -> String {
        func at(_ context: DecodingError.Context) -> String {
            let path = context.codingPath.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: ".")
            return path.isEmpty ? context.debugDescription : "\(path): \(context.debugDescription)"
        }
        switch error {
        case DecodingError.keyNotFound(let key, let context):
            return "missing \(key.stringValue) (\(at(context)))"
        case DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context),
            DecodingError.dataCorrupted(let context):
            return at(context)
        default:
            return String(describing: error)
        }
    }
}
