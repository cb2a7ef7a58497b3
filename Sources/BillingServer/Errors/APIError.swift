import Foundation
import HTTPTypes
import Hummingbird

/// An error a client sees: an HTTP status and a JSON body `{"error": {"code", "message"}}`.
public struct APIError: HTTPResponseError, Sendable {
    public let status: HTTPResponse.Status
    /// Stable, machine-readable reason (e.g. `signature_mismatch`).
    public let code: String
    /// What happened and what to do, for a person.
    public let message: String
    /// More members of the error object (e.g. `manage_url`).
    public let extra: [String: String]

    public init(_ status: HTTPResponse.Status, code: String, message: String, extra: [String: String] = [:]) {
        self.status = status
        self.code = code
        self.message = message
        self.extra = extra
    }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        var error: [String: Any] = ["code": code, "message": message]
        for (key, value) in extra { error[key] = value }
        return Self.jsonResponse(status: status, body: ["error": error])
    }

    /// A JSON response with the given status.
    static func jsonResponse(status: HTTPResponse.Status, body: [String: Any]) -> Response {
        Response(
            status: status,
            headers: [.contentType: "application/json"],
            body: .init(byteBuffer: jsonBytes(body)))
    }

    /// The bytes of an error body, `{"error":{"code":…,"message":…}}`, for answers written
    /// below the router (see ``RequestGuard``).
    static func errorBody(code: String, message: String) -> ByteBuffer {
        jsonBytes(["error": ["code": code, "message": message]])
    }

    private static func jsonBytes(_ body: [String: Any]) -> ByteBuffer {
        let data = (try? JSONSerialization.data(withJSONObject: body, options: [.sortedKeys])) ?? Data("{}".utf8)
        return ByteBuffer(bytes: data)
    }
}
