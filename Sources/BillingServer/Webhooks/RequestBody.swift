import BillingCore
import Foundation
import Hummingbird
import NIOCore
import NIOHTTP1

/// Reading a request body whole, up to a size limit: 413 `body_too_large` above it, whether the
/// client declared the length or not; 400 `malformed_request` when its framing is not HTTP
/// (bad chunks, an unknown `Transfer-Encoding`), never a 500.
enum RequestBody {
    static func collect(_ request: Request, limit: Int) async throws -> [UInt8] {
        if let declared = request.headers[.contentLength].flatMap(Int.init), declared > limit {
            throw tooLarge(limit)
        }
        do {
            let buffer = try await request.body.collect(upTo: limit)
            return Array(buffer.readableBytesView)
        } catch {
            throw clientError(error, limit: limit) ?? error
        }
    }

    /// The answer to an error met while reading a body, when it is the client's doing: too large,
    /// malformed framing, or too slow.
    static func clientError(_ error: any Error, limit: Int? = nil) -> APIError? {
        switch error {
        case is NIOTooManyBytesError:
            return limit.map(tooLarge) ?? APIError(.contentTooLarge, reason: .bodyTooLarge, message: "The body is too large.")
        case let parserError as HTTPParserError:
            return APIError(.badRequest, code: "malformed_request", message: RequestGuard.message(parserError))
        case is RequestBodyTimeout:
            return APIError(
                .requestTimeout, code: "request_timeout",
                message: "The body did not arrive within the body timeout (BILLINGD_BODY_TIMEOUT); the connection is closed.")
        default:
            return nil
        }
    }

    /// Refuses a JSON endpoint's body sent without `Content-Type: application/json` (parameters
    /// such as `charset` allowed) with 415 `unsupported_media_type`; an empty body needs none.
    static func requireJSON(_ request: Request, body: [UInt8]) throws(APIError) {
        let type = request.headers[.contentType]
        let mediaType = type?.split(separator: ";", omittingEmptySubsequences: false).first
            .map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        if mediaType == "application/json" { return }
        if type == nil, body.allSatisfy({ [0x20, 0x09, 0x0A, 0x0D].contains($0) }) { return }
        throw APIError(
            .unsupportedMediaType, code: "unsupported_media_type",
            message: type.map { "The body must be JSON, sent with Content-Type: application/json (it was \(UserRequest.printable($0)))." }
                ?? "The body must be JSON, sent with Content-Type: application/json (the request has no Content-Type).")
    }

    /// Refuses a JSON request body in which an object names a member twice (400
    /// `duplicate_field`): which of the two was meant cannot be known, so neither is taken.
    static func refuseDuplicateMembers(_ body: [UInt8]) throws(APIError) {
        guard let name = UntrustedJSON.duplicateKey(in: body) else { return }
        throw APIError(
            .badRequest, code: "duplicate_field",
            message: "The body names \"\(UserRequest.printable(name))\" twice in one object; send each field once.",
            extra: ["field": UserRequest.printable(name)])
    }

    static func tooLarge(_ limit: Int) -> APIError {
        APIError(.contentTooLarge, reason: .bodyTooLarge, message: "The body is larger than \(limit) bytes.")
    }
}
