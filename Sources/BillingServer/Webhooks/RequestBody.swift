import Hummingbird
import NIOCore

/// Reading a request body whole, up to a size limit: 413 `body_too_large` above it, whether the
/// client declared the length or not.
enum RequestBody {
    static func collect(_ request: Request, limit: Int) async throws -> [UInt8] {
        if let declared = request.headers[.contentLength].flatMap(Int.init), declared > limit {
            throw tooLarge(limit)
        }
        do {
            let buffer = try await request.body.collect(upTo: limit)
            return Array(buffer.readableBytesView)
        } catch is NIOTooManyBytesError {
            throw tooLarge(limit)
        }
    }

    static func tooLarge(_ limit: Int) -> APIError {
        APIError(.contentTooLarge, code: "body_too_large", message: "The body is larger than \(limit) bytes.")
    }
}
