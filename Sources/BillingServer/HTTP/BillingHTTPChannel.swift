import HTTPTypes
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1

/// billingd's HTTP/1.1 connections: the pipeline of Hummingbird's `HTTP1Channel` (2.28.1) with
/// two handlers it lacks, so that every answer is JSON:
///
/// - ``KeepAliveHandler`` closes after the response when the request asks for it, HTTP/1.0
///   included (Hummingbird only honours a literal `Connection: close`);
/// - ``RequestGuard`` answers HTTP framing the parser refuses (bad chunks, oversized or invalid
///   headers, `Content-Length` beside `Transfer-Encoding`) with a JSON 400 and closes.
struct BillingHTTPChannel: ServerChildChannel, HTTPChannelHandler {
    typealias Value = NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>

    let responder: HTTPChannelHandler.Responder

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            let pipeline = channel.pipeline.syncOperations
            try pipeline.configureHTTPServerPipeline(
                withPipeliningAssistance: false,  // NIOAsyncChannel reads one request at a time
                withErrorHandling: false,  // RequestGuard answers parser errors, in JSON
                withOutboundHeaderValidation: false,  // swift-http-types validates header fields
                withEncoderConfiguration: .init(),
                withDecoderLimitConfiguration: .init())
            try pipeline.addHandler(KeepAliveHandler())
            try pipeline.addHandler(HTTP1ToHTTPServerCodec(secure: false))
            try pipeline.addHandler(RequestGuard(logger: logger))
            try pipeline.addHandler(HTTPConnectionStateHandler(logger: logger))
            return try NIOAsyncChannel(wrappingChannelSynchronously: channel, configuration: .init(isOutboundHalfClosureEnabled: true))
        }
    }

    func handle(value asyncChannel: Value, logger: Logger) async {
        await handleHTTP(asyncChannel: asyncChannel, logger: logger)
    }
}

extension HTTPServerBuilder {
    /// HTTP/1.1 served by ``BillingHTTPChannel``.
    static var billingd: HTTPServerBuilder {
        HTTPServerBuilder { responder in BillingHTTPChannel(responder: responder) }
    }
}

/// Marks every request that does not keep its connection alive (HTTP/1.0 without
/// `Connection: keep-alive`, or `Connection: close` in any case) with exactly
/// `Connection: close`, the one spelling after which Hummingbird closes the connection.
final class KeepAliveHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .head(var head) = unwrapInboundIn(data), !head.isKeepAlive else {
            context.fireChannelRead(data)
            return
        }
        head.headers.replaceOrAdd(name: "connection", value: "close")
        context.fireChannelRead(wrapInboundOut(.head(head)))
    }
}

/// Watches each request on a connection and answers framing the HTTP parser refuses with a
/// JSON 400, then closes.
///
/// A parser error before any request is in flight is answered here. One in the body of the
/// request being answered is passed on, so that the route reading the body fails (and answers
/// 400, see ``RequestBody``) instead of taking a partial body, and the connection closes after
/// that answer: the parser cannot find the next request in what follows.
final class RequestGuard: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// Where the connection is in reading requests.
    private enum Phase {
        /// Between requests.
        case waiting
        /// The head is read; the body is arriving.
        case body
        /// The parser failed: nothing more is read, the connection closes.
        case failed
    }

    private let logger: Logger
    private var phase = Phase.waiting
    /// Requests whose head was read and whose response has not ended.
    private var openResponses = 0
    private var closeAfterResponse = false

    init(logger: Logger) {
        self.logger = logger
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head:
            openResponses += 1
            phase = .body
        case .body:
            break
        case .end:
            phase = .waiting
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(var response) where closeAfterResponse:
            response.headerFields[.connection] = "close"
            context.write(wrapOutboundOut(.head(response)), promise: promise)
        case .end:
            openResponses -= 1
            if closeAfterResponse, openResponses <= 0 {
                context.writeAndFlush(data, promise: promise)
                context.close(promise: nil)
            } else {
                context.write(data, promise: promise)
            }
        default:
            context.write(data, promise: promise)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard let parserError = error as? HTTPParserError else {
            context.fireErrorCaught(error)
            return
        }
        let failedPhase = phase
        phase = .failed
        if openResponses <= 0 {
            logger.debug("malformed HTTP request refused", metadata: ["error": "\(parserError)"])
            respond(to: parserError, context: context)
            return
        }
        // A request is being answered: close once that answer is written.
        closeAfterResponse = true
        if failedPhase == .body { context.fireErrorCaught(error) }
    }

    /// The JSON 400 for framing the parser refused, then the connection closes.
    private func respond(to error: HTTPParserError, context: ChannelHandlerContext) {
        let body = APIError.errorBody(code: "malformed_request", message: Self.message(error))
        var fields = HTTPFields()
        fields[.contentType] = "application/json"
        fields[.contentLength] = String(body.readableBytes)
        fields[.connection] = "close"
        context.write(wrapOutboundOut(.head(HTTPResponse(status: .badRequest, headerFields: fields))), promise: nil)
        context.write(wrapOutboundOut(.body(body)), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        context.close(promise: nil)
    }

    /// What was wrong, in the words of the error body.
    static func message(_ error: HTTPParserError) -> String {
        let problem =
            switch error {
            case .headerOverflow: "its head is larger than the \(NIOHTTPDecoderLimitConfiguration().maxHeaderListSize / 1024) KiB accepted"
            case .invalidChunkSize: "a chunk size of its chunked body is not a hexadecimal number"
            case .invalidHeaderToken, .invalidCharactersUsed: "a header name or value holds a character HTTP does not allow"
            case .unexpectedContentLength, .invalidContentLength: "its Content-Length is invalid or sent beside Transfer-Encoding"
            case .invalidMethod: "its method is not an HTTP method"
            case .invalidURL: "its target is not a valid URL path"
            case .invalidVersion: "its HTTP version is not 1.0 or 1.1"
            default: "its framing (Content-Length, Transfer-Encoding: chunked, or the chunks) is invalid"
            }
        return "The request is not valid HTTP/1.1: \(problem). The connection is closed."
    }
}

@available(*, unavailable)
extension RequestGuard: Sendable {}
