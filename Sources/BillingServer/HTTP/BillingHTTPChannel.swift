import HTTPTypes
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1

/// billingd's HTTP/1.1 connections: the pipeline of Hummingbird's `HTTP1Channel` (2.28.1) with
/// three handlers it lacks, so that every answer is JSON and no client holds a connection
/// without making progress:
///
/// - ``KeepAliveHandler`` closes after the response when the request asks for it, HTTP/1.0
///   included (Hummingbird only honours a literal `Connection: close`);
/// - ``RequestGuard`` answers HTTP framing the parser refuses (bad chunks, oversized or invalid
///   headers, `Content-Length` beside `Transfer-Encoding`) with a JSON 400 and closes, and
///   closes a connection whose request head or body is late (``ConnectionLimits``);
/// - ``ReadObserver``, first in the pipeline, tells the guard when a request's first bytes
///   arrive, which the HTTP decoder does not say until the head is complete.
///
/// Idle connections are closed by Hummingbird's `HTTPConnectionStateHandler`, and the connection
/// cap is Hummingbird's `MaximumAvailableConnections` on the listening socket.
struct BillingHTTPChannel: ServerChildChannel, HTTPChannelHandler {
    typealias Value = NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>

    let responder: HTTPChannelHandler.Responder
    let limits: ConnectionLimits

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            let pipeline = channel.pipeline.syncOperations
            try pipeline.addHandler(ReadObserver())
            try pipeline.configureHTTPServerPipeline(
                withPipeliningAssistance: false,  // NIOAsyncChannel reads one request at a time
                withErrorHandling: false,  // RequestGuard answers parser errors, in JSON
                withOutboundHeaderValidation: false,  // swift-http-types validates header fields
                withEncoderConfiguration: .init(),
                withDecoderLimitConfiguration: .init())
            try pipeline.addHandler(KeepAliveHandler())
            try pipeline.addHandler(HTTP1ToHTTPServerCodec(secure: false))
            try pipeline.addHandler(RequestGuard(headerTimeout: limits.headerTimeout, bodyTimeout: limits.bodyTimeout, logger: logger))
            try pipeline.addHandler(HTTPConnectionStateHandler(idleTimeout: limits.idleTimeout, logger: logger))
            return try NIOAsyncChannel(wrappingChannelSynchronously: channel, configuration: .init(isOutboundHalfClosureEnabled: true))
        }
    }

    func handle(value asyncChannel: Value, logger: Logger) async {
        await handleHTTP(asyncChannel: asyncChannel, logger: logger)
    }
}

extension HTTPServerBuilder {
    /// HTTP/1.1 served by ``BillingHTTPChannel`` within `limits`.
    static func billingd(_ limits: ConnectionLimits) -> HTTPServerBuilder {
        HTTPServerBuilder { responder in BillingHTTPChannel(responder: responder, limits: limits) }
    }
}

/// Bytes arrived on the connection: sent through the pipeline by ``ReadObserver`` before the
/// bytes themselves, so that ``RequestGuard`` can time a request head from its first byte.
struct ConnectionBytesRead: Sendable {}

/// First in the pipeline: announces every read (``ConnectionBytesRead``) before passing it on.
final class ReadObserver: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        context.fireUserInboundEventTriggered(ConnectionBytesRead())
        context.fireChannelRead(data)
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

/// A request whose body was not complete `bodyTimeout` after its head: its reader fails with
/// this as the connection closes. (Had the connection just closed, the HTTP decoder would fail
/// it too, for the missing rest of the body: what arrived is never taken for the whole.)
public struct RequestBodyTimeout: Error, Sendable {}

/// Watches each request on a connection: answers framing the HTTP parser refuses with a JSON
/// 400 and closes; closes the connection when a request's head is not complete
/// `headerTimeout` after its first byte, or its body `bodyTimeout` after the head.
///
/// Every request gets one answer, and after a parser error the connection closes, since the
/// parser cannot find the next request in what follows. An error in a request head is answered
/// here (or, behind a request still being answered, closes the connection after that answer).
/// One in the body of the request being answered is passed on, so that the route reading the
/// body fails (and answers 400, see ``RequestBody``) instead of taking a partial body. One in
/// the rest of a body whose request was answered already just closes the connection.
final class RequestGuard: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// Where the connection is in reading requests.
    private enum Phase {
        /// Between requests: nothing of the next one has arrived.
        case waiting
        /// Bytes of a request head have arrived; it is due by the deadline.
        case head
        /// The head is read; the body is due by the deadline.
        case body
        /// The parser failed: nothing more is read, the connection closes.
        case failed
    }

    private let headerTimeout: TimeAmount
    private let bodyTimeout: TimeAmount
    private let logger: Logger
    private var phase = Phase.waiting
    /// Requests whose head was read and whose response has not ended.
    private var openResponses = 0
    private var closeAfterResponse = false
    private var deadline: Scheduled<Void>?

    init(headerTimeout: Duration, bodyTimeout: Duration, logger: Logger) {
        self.headerTimeout = TimeAmount(headerTimeout)
        self.bodyTimeout = TimeAmount(bodyTimeout)
        self.logger = logger
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is ConnectionBytesRead {
            if phase == .waiting {
                phase = .head
                schedule(headerTimeout, context: context)
            }
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head:
            openResponses += 1
            phase = .body
            schedule(bodyTimeout, context: context)
        case .body:
            break
        case .end:
            cancelDeadline()
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
        // Already failed (a deadline closed the connection, and the decoder then found the rest
        // missing): the reader has its error.
        guard failedPhase != .failed else { return }
        phase = .failed
        cancelDeadline()
        switch (failedPhase, openResponses > 0) {
        case (.body, true):
            // In the body of the request being answered: its reader fails (and answers 400), and
            // the connection closes after that answer.
            closeAfterResponse = true
            context.fireErrorCaught(error)
        case (.body, false):
            // In the rest of a body whose request is answered already: a second answer would be
            // one too many; close.
            context.close(promise: nil)
        case (_, true):
            // In the head of a request pipelined behind the one being answered.
            closeAfterResponse = true
        case (_, false):
            logger.debug("malformed HTTP request refused", metadata: ["error": "\(parserError)"])
            respond(to: parserError, context: context)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        cancelDeadline()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        cancelDeadline()
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

    private func schedule(_ timeout: TimeAmount, context: ChannelHandlerContext) {
        cancelDeadline()
        let loopBound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
        deadline = context.eventLoop.scheduleTask(in: timeout) {
            loopBound.value.handler.deadlinePassed(context: loopBound.value.context)
        }
    }

    private func cancelDeadline() {
        deadline?.cancel()
        deadline = nil
    }

    private func deadlinePassed(context: ChannelHandlerContext) {
        deadline = nil
        switch phase {
        case .head where openResponses > 0:
            // The next request is late while this one is answered: close after the answer.
            closeAfterResponse = true
        case .head:
            logger.debug("request head too slow, closing the connection")
            phase = .failed
            context.close(promise: nil)
        case .body:
            logger.debug("request body too slow, closing the connection")
            phase = .failed
            context.fireErrorCaught(RequestBodyTimeout())
            context.close(promise: nil)
        case .waiting, .failed:
            break
        }
    }
}

@available(*, unavailable)
extension RequestGuard: Sendable {}
