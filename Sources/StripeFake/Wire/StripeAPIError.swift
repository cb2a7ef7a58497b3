import HTTPTypes
import Hummingbird
import NIOCore

/// An error answer exactly as Stripe shapes it: `{"error":{"code","doc_url","message","param","type"}}`.
public struct StripeAPIError: Error, Sendable, Equatable, HTTPResponseError {
    public var status: HTTPResponse.Status
    /// `invalid_request_error`, `api_error`, `idempotency_error`, `card_error`, …
    public var type: String
    public var code: String?
    public var param: String?
    public var message: String
    /// Extra response headers, e.g. `Retry-After` or `Stripe-Should-Retry`.
    public var headers: HTTPFields

    public init(
        status: HTTPResponse.Status, type: String, code: String? = nil, param: String? = nil, message: String,
        headers: HTTPFields = [:]
    ) {
        self.status = status
        self.type = type
        self.code = code
        self.param = param
        self.message = message
        self.headers = headers
    }

    /// The JSON body.
    var body: [UInt8] {
        var error: [String: JSONValue] = ["type": .string(type), "message": .string(message)]
        if let code {
            error["code"] = .string(code)
            error["doc_url"] = .string("https://stripe.com/docs/error-codes/\(code.replacingUnderscores())")
        }
        if let param { error["param"] = .string(param) }
        return JSONValue.object(["error": .object(error)]).serialized()
    }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        var headers = self.headers
        headers[.contentType] = "application/json"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }
}

extension String {
    fileprivate func replacingUnderscores() -> String { String(map { $0 == "_" ? "-" : $0 }) }
}

// MARK: - The errors Stripe answers with

extension StripeAPIError {
    static func invalidRequest(_ message: String, param: String? = nil, code: String? = nil) -> StripeAPIError {
        StripeAPIError(status: .badRequest, type: "invalid_request_error", code: code, param: param, message: message)
    }

    static func unknownParameter(_ name: String) -> StripeAPIError {
        invalidRequest("Received unknown parameter: \(name)", param: name, code: "parameter_unknown")
    }

    static func missingParameter(_ name: String) -> StripeAPIError {
        invalidRequest("Missing required param: \(name).", param: name, code: "parameter_missing")
    }

    static func invalidInteger(_ name: String, _ value: String) -> StripeAPIError {
        invalidRequest("Invalid integer: \(value)", param: name, code: "parameter_invalid_integer")
    }

    static func invalidBoolean(_ name: String, _ value: String) -> StripeAPIError {
        invalidRequest("Invalid boolean: \(value)", param: name)
    }

    static func invalidString(_ name: String) -> StripeAPIError {
        invalidRequest("Invalid string: \(name) must be a string, not a hash or an array", param: name)
    }

    static func invalidHash(_ name: String) -> StripeAPIError {
        invalidRequest("Invalid object", param: name)
    }

    static func invalidArray(_ name: String) -> StripeAPIError {
        invalidRequest("Invalid array", param: name)
    }

    static func invalidEnum(_ name: String, _ value: String, allowed: [String]) -> StripeAPIError {
        let list =
            allowed.count > 1 ? allowed.dropLast().joined(separator: ", ") + ", or " + allowed.last! : allowed.joined()
        return invalidRequest("Invalid \(name): must be one of \(list)", param: name)
    }

    static func exclusive(_ names: [String]) -> StripeAPIError {
        invalidRequest(
            "You may only specify one of these parameters: \(names.joined(separator: ", ")).", param: names.last,
            code: "parameters_exclusive")
    }

    /// `No such customer: 'cus_…'`; 404 for the object in the path, 400 for one named by a parameter.
    static func noSuch(_ kind: ObjectKind, _ id: String, param: String? = nil) -> StripeAPIError {
        StripeAPIError(
            status: param == nil ? .notFound : .badRequest, type: "invalid_request_error", code: "resource_missing",
            param: param ?? "id", message: "No such \(kind.displayName): '\(id)'")
    }

    static func unrecognizedURL(method: HTTPRequest.Method, path: String) -> StripeAPIError {
        StripeAPIError(
            status: .notFound, type: "invalid_request_error",
            message:
                "Unrecognized request URL (\(method.rawValue): \(path)). Please see https://stripe.com/docs or we can help at https://support.stripe.com/."
        )
    }

    static func missingAPIKey() -> StripeAPIError {
        StripeAPIError(
            status: .unauthorized, type: "invalid_request_error",
            message:
                "You did not provide an API key. You need to provide your API key in the Authorization header, using Bearer auth (e.g. 'Authorization: Bearer YOUR_SECRET_KEY'). See https://stripe.com/docs/api#authentication for details, or we can help at https://support.stripe.com/."
        )
    }

    static func invalidAPIKey(_ key: String) -> StripeAPIError {
        StripeAPIError(
            status: .unauthorized, type: "invalid_request_error", code: nil,
            message: "Invalid API Key provided: \(maskedKey(key))")
    }

    static func expiredAPIKey(_ key: String) -> StripeAPIError {
        StripeAPIError(
            status: .unauthorized, type: "invalid_request_error", code: "api_key_expired",
            message: "Expired API Key provided: \(maskedKey(key))")
    }

    static func idempotencyConflict(_ key: String) -> StripeAPIError {
        StripeAPIError(
            status: .badRequest, type: "idempotency_error",
            message:
                "Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '\(key)' if you meant to execute a different request."
        )
    }

    /// A meter event whose identifier Stripe already holds: refused, and not to be retried. Stripe's
    /// v1 answer names no `code` (the v2 API's is `duplicate_meter_event`).
    static func duplicateMeterEvent(_ identifier: String) -> StripeAPIError {
        var error = invalidRequest("An event already exists with identifier \(identifier).")
        error.headers[.stripeShouldRetry] = "false"
        return error
    }

    /// A key as Stripe shows it in errors: the `sk_test_` prefix, stars, the last four characters.
    static func maskedKey(_ key: String) -> String {
        let parts = key.split(separator: "_", maxSplits: 2, omittingEmptySubsequences: false)
        let prefix = parts.count == 3 ? "\(parts[0])_\(parts[1])_" : ""
        let secret = parts.count == 3 ? String(parts[2]) : key
        guard secret.count > 4 else { return prefix + String(repeating: "*", count: secret.count) }
        return prefix + "****" + secret.suffix(4)
    }
}
