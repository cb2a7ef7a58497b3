import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// Stripe's wire rules around every route: records the request, applies an injected fault,
/// checks the API key, reads `Stripe-Account` / `Stripe-Version` / `Idempotency-Key` and the
/// parameters, renders every error as Stripe's JSON, and stamps `Request-Id` on every answer.
struct StripeWireMiddleware: RouterMiddleware {
    typealias Context = FakeRequestContext

    let store: FakeStore
    let apiKey: String
    /// Form bodies larger than this are refused; Stripe's own limit is far above any real request.
    var maximumBodySize = 1 << 20

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws
        -> Response
    {
        // The hosted pages are a browser's, not the API's: no key, no Stripe wire format.
        if request.uri.path.hasPrefix(HostedPages.prefix) { return try await next(request, context) }
        let requestID = store.ids.make("req_", length: 14)
        var response: Response
        do {
            response = try await respond(to: request, requestID: requestID, context: context, next: next)
        } catch let error as StripeAPIError {
            response = try error.response(from: request, context: context)
        } catch let error as HTTPError where error.status == .notFound {
            response = try StripeAPIError.unrecognizedURL(method: request.method, path: request.uri.path)
                .response(from: request, context: context)
        } catch let error as any HTTPResponseError {
            response = try StripeAPIError(status: error.status, type: "invalid_request_error", message: "\(error)")
                .response(from: request, context: context)
        }
        response.headers[.requestID] = requestID
        response.headers[.cacheControl] = "no-cache, no-store"
        if let version = request.headers[.stripeVersion] { response.headers[.stripeVersion] = version }
        if request.method == .post, let key = request.headers[.idempotencyKey] {
            response.headers[.idempotencyKey] = key
        }
        return response
    }

    private func respond(
        to request: Request, requestID: String, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        var request = request
        let body = try await request.collectBody(upTo: maximumBodySize)
        let method = request.method
        let path = request.uri.path
        let query = request.uri.query
        let bodyBytes = Array(buffer: body)
        let contentType = request.headers[.contentType]?.lowercased()

        // Parameters: the query for GET and DELETE, the form body for POST. A POST without
        // parameters (detach, expire) may come without a content type, as Stripe's libraries send it.
        let parameters: Result<FormValue, StripeAPIError>
        do throws(FormDecodingError) {
            if method == .post {
                if !bodyBytes.isEmpty, contentType?.hasPrefix("application/x-www-form-urlencoded") != true {
                    parameters = .failure(
                        .invalidRequest(
                            "Invalid request: the body must be application/x-www-form-urlencoded, not \(contentType ?? "missing").",
                            param: nil))
                } else {
                    parameters = .success(try FormValue.decode(String(decoding: bodyBytes, as: UTF8.self)))
                }
            } else {
                parameters = .success(try FormValue.decode(query ?? ""))
            }
        } catch {
            parameters = .failure(.invalidRequest(error.reason, param: error.parameter))
        }

        let account = request.headers[.stripeAccount]
        let apiVersion = request.headers[.stripeVersion]
        let idempotencyKey = request.headers[.idempotencyKey]
        let recorded = RecordedRequest(
            requestID: requestID, method: method.rawValue, path: path, query: query,
            parameters: try? parameters.get(), body: bodyBytes,
            headers: request.headers.map { ($0.name.canonicalName, $0.value) }, idempotencyKey: idempotencyKey,
            stripeVersion: apiVersion, account: account, receivedAt: store.clock.now)
        var answerDelay: Duration?
        if let fault = await store.receive(recorded) {
            switch fault.effect {
            case .status(let code, let retryAfter, let shouldRetry):
                throw Fault.error(status: code, retryAfter: retryAfter, shouldRetry: shouldRetry)
            case .delay(let duration):
                try await Task.sleep(for: duration)
            case .delayAnswer(let duration):
                answerDelay = duration
            case .dropConnection:
                try? await context.channel.close()
                throw ConnectionDropped()
            case .expiredKey:
                throw StripeAPIError.expiredAPIKey(presentedKey(request) ?? apiKey)
            }
        }

        guard let key = presentedKey(request) else { throw StripeAPIError.missingAPIKey() }
        guard key == apiKey else { throw StripeAPIError.invalidAPIKey(key) }
        if let account, !account.hasPrefix("acct_") {
            throw StripeAPIError(
                status: .forbidden, type: "invalid_request_error", code: "account_invalid",
                message:
                    "The provided key '\(StripeAPIError.maskedKey(key))' does not have access to account '\(account)' (or that account does not exist). Application access may have been revoked."
            )
        }
        if let apiVersion, !Self.isAPIVersion(apiVersion) {
            throw StripeAPIError.invalidRequest(
                "Invalid Stripe API version: \(apiVersion)", code: "api_version_invalid")
        }
        if let idempotencyKey, idempotencyKey.count > 255 {
            throw StripeAPIError.invalidRequest(
                "Invalid Idempotency-Key: keys must be at most 255 characters long.", param: "Idempotency-Key")
        }

        var context = context
        context.apiRequest = APIRequest(
            method: method, path: path, parameters: try parameters.get(), account: account, requestID: requestID,
            idempotencyKey: method == .post ? idempotencyKey : nil, apiVersion: apiVersion)
        guard let answerDelay else { return try await next(request, context) }
        // The operation has run whatever comes of the wait; the answer follows it.
        let result: Result<Response, any Error>
        do {
            result = .success(try await next(request, context))
        } catch {
            result = .failure(error)
        }
        try? await Task.sleep(for: answerDelay)
        return try result.get()
    }

    /// The key from `Authorization: Bearer sk_…` or HTTP Basic with the key as user name.
    private func presentedKey(_ request: Request) -> String? {
        guard let authorization = request.headers[.authorization] else { return nil }
        if authorization.hasPrefix("Bearer ") {
            let key = authorization.dropFirst("Bearer ".count).trimmingCharacters(in: .whitespaces)
            return key.isEmpty ? nil : key
        }
        if authorization.hasPrefix("Basic "),
            let data = Data(base64Encoded: String(authorization.dropFirst("Basic ".count)))
        {
            return String(decoding: data, as: UTF8.self).split(separator: ":", omittingEmptySubsequences: false).first
                .map(String.init)
        }
        return nil
    }

    /// `2026-10-28.clover` or `2023-08-16`.
    static func isAPIVersion(_ version: String) -> Bool {
        let parts = version.split(separator: ".", maxSplits: 1)
        guard let day = parts.first else { return false }
        let date = day.split(separator: "-")
        guard date.count == 3, date[0].count == 4, date[1].count == 2, date[2].count == 2,
            date.allSatisfy({ $0.allSatisfy(\.isNumber) })
        else { return false }
        return parts.count == 1 || parts[1].allSatisfy { $0.isLetter && $0.isLowercase }
    }
}

/// Thrown after a `.dropConnection` fault closed the channel; nothing is written back.
struct ConnectionDropped: Error {}
