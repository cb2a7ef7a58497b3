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
///   headers, `Content-Length` beside `Transfer-Encoding`) with a JSON 400 and closes, closes a
///   connection whose request head or body is late or slower than the minimum transfer rate
///   (``ConnectionLimits``), and tells ``ConnectionAdmission`` when the connection may be evicted;
/// - ``ReadObserver``, first in the pipeline, tells the guard when bytes arrive, which the HTTP
///   decoder does not say until a head is complete.
///
/// Idle connections are closed by Hummingbird's `HTTPConnectionStateHandler`. The connection
/// caps are ``ConnectionAdmission``'s, applied as each connection is set up, so that a new client
/// is never left in the listen backlog behind slow ones.
struct BillingHTTPChannel: ServerChildChannel, HTTPChannelHandler {
    typealias Value = NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>

    let responder: HTTPChannelHandler.Responder
    let limits: ConnectionLimits
    let admission: ConnectionAdmission
    let metrics: BillingMetrics

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            let decision = admission.admit(channel)
            let connection: Int?
            switch decision {
            case .admitted(let id):
                connection = id
                channel.closeFuture.whenComplete { [admission] _ in admission.remove(id) }
            case .refused(let scope):
                connection = nil
                logger.debug("connection refused: every connection at the cap has sent its request head", metadata: ["scope": "\(scope.rawValue)"])
            }
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
            try pipeline.addHandler(
                RequestGuard(limits: limits, admission: admission, connection: connection, metrics: metrics, logger: logger))
            try pipeline.addHandler(HTTPConnectionStateHandler(idleTimeout: limits.idleTimeout, logger: logger))
            return try NIOAsyncChannel(wrappingChannelSynchronously: channel, configuration: .init(isOutboundHalfClosureEnabled: true))
        }
    }

    func handle(value asyncChannel: Value, logger: Logger) async {
        await handleHTTP(asyncChannel: asyncChannel, logger: logger)
    }
}

extension HTTPServerBuilder {
    /// HTTP/1.1 served by ``BillingHTTPChannel`` within `limits`, its evictions, refusals and
    /// slow connections counted in `metrics`.
    static func billingd(_ limits: ConnectionLimits, metrics: BillingMetrics) -> HTTPServerBuilder {
        let admission = ConnectionAdmission(limits: limits, metrics: metrics)
        return HTTPServerBuilder { responder in
            BillingHTTPChannel(responder: responder, limits: limits, admission: admission, metrics: metrics)
        }
    }
}

/// Bytes arrived on the connection: sent through the pipeline by ``ReadObserver`` before the
/// bytes themselves, so that ``RequestGuard`` can time a request head from its first byte and
/// measure the transfer rate.
struct ConnectionBytesRead: Sendable {
    let count: Int
}

/// First in the pipeline: announces every read (``ConnectionBytesRead``) before passing it on.
final class ReadObserver: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        context.fireUserInboundEventTriggered(ConnectionBytesRead(count: unwrapInboundIn(data).readableBytes))
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
/// `headerTimeout` after its first byte, or its body `bodyTimeout` after the head, or when
/// either arrives slower than `minimumTransferRate`; and keeps ``ConnectionAdmission`` told
/// whether the connection may be evicted (before a complete head, and once every request read
/// is answered) and whether it reads a body (answering 503 when the body budget is spent).
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
        /// The parser failed, or the request was refused: nothing more is read, the connection closes.
        case failed
    }

    private let headerTimeout: TimeAmount
    private let bodyTimeout: TimeAmount
    /// Bytes each rate window must bring while a head or body is read; 0: no rate check.
    private let bytesPerWindow: Int
    private let rateWindow: TimeAmount
    private let admission: ConnectionAdmission
    /// The connection's id in ``admission``; nil when it was refused, and is closed at once.
    private let connection: Int?
    private let metrics: BillingMetrics
    private let logger: Logger
    private var phase = Phase.waiting
    /// Requests whose head was read and whose response has not ended.
    private var openResponses = 0
    private var closeAfterResponse = false
    private var deadline: Scheduled<Void>?
    private var rateCheck: Scheduled<Void>?
    private var bytesThisWindow = 0
    /// A read was asked for and has not completed: a window without bytes is the client's doing,
    /// not back-pressure from a route that has not read its body yet.
    private var readRequested = false

    init(limits: ConnectionLimits, admission: ConnectionAdmission, connection: Int?, metrics: BillingMetrics, logger: Logger) {
        headerTimeout = TimeAmount(limits.headerTimeout)
        bodyTimeout = TimeAmount(limits.bodyTimeout)
        rateWindow = TimeAmount(limits.transferRateWindow)
        bytesPerWindow = Int(Int64(limits.minimumTransferRate) * rateWindow.nanoseconds / 1_000_000_000)
        self.admission = admission
        self.connection = connection
        self.metrics = metrics
        self.logger = logger
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if connection == nil, context.channel.isActive { context.close(promise: nil) }
    }

    func channelActive(context: ChannelHandlerContext) {
        if connection == nil {
            context.close(promise: nil)
            return
        }
        context.fireChannelActive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let read = event as? ConnectionBytesRead {
            bytesThisWindow += read.count
            if phase == .waiting {
                phase = .head
                schedule(headerTimeout, context: context)
                startRateWindow(context: context)
            }
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard phase != .failed else { return }
        switch unwrapInboundIn(data) {
        case .head(let request):
            let decision = connection.map { admission.startRequest($0, hasBody: Self.hasBody(request)) } ?? .evicted
            switch decision {
            case .serve:
                break
            case .evicted:
                phase = .failed
                cancelDeadline()
                context.close(promise: nil)
                return
            case .busy(let scope):
                phase = .failed
                cancelDeadline()
                if openResponses > 0 {
                    closeAfterResponse = true
                } else {
                    respondBusy(scope, context: context)
                }
                return
            }
            openResponses += 1
            phase = .body
            schedule(bodyTimeout, context: context)
            startRateWindow(context: context)
        case .body:
            break
        case .end:
            cancelDeadline()
            phase = .waiting
            if let connection {
                if openResponses > 0 { admission.endBody(connection) } else { admission.endRequest(connection) }
            }
        }
        context.fireChannelRead(data)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        readRequested = false
        context.fireChannelReadComplete()
    }

    func read(context: ChannelHandlerContext) {
        readRequested = true
        context.read()
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(var response) where closeAfterResponse:
            response.headerFields[.connection] = "close"
            context.write(wrapOutboundOut(.head(response)), promise: promise)
        case .end:
            openResponses -= 1
            if openResponses <= 0, phase != .body, let connection { admission.endRequest(connection) }
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

    /// Whether a request head announces a body: a `Content-Length` above 0, or any `Transfer-Encoding`.
    static func hasBody(_ request: HTTPRequest) -> Bool {
        if request.headerFields[.transferEncoding] != nil { return true }
        return request.headerFields[.contentLength].flatMap { Int($0) }.map { $0 > 0 } ?? false
    }

    /// The JSON 503 for a request with a body beyond the body budget, then the connection closes.
    private func respondBusy(_ scope: ConnectionAdmission.Scope, context: ChannelHandlerContext) {
        let whose = scope == .client ? "from your address" : "in all"
        let body = APIError.errorBody(
            code: "server_busy",
            message: "billingd is reading as many request bodies \(whose) as it takes at once; send the request again shortly. The connection is closed.")
        var fields = HTTPFields()
        fields[.contentType] = "application/json"
        fields[.contentLength] = String(body.readableBytes)
        fields[.connection] = "close"
        fields[.retryAfter] = "1"
        context.write(wrapOutboundOut(.head(HTTPResponse(status: .serviceUnavailable, headerFields: fields))), promise: nil)
        context.write(wrapOutboundOut(.body(body)), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        context.close(promise: nil)
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

    /// Cancels the head or body deadline and the rate check: the part they watch is complete.
    private func cancelDeadline() {
        deadline?.cancel()
        deadline = nil
        rateCheck?.cancel()
        rateCheck = nil
    }

    /// Starts judging the transfer rate afresh, over windows of `rateWindow`.
    private func startRateWindow(context: ChannelHandlerContext) {
        rateCheck?.cancel()
        rateCheck = nil
        bytesThisWindow = 0
        guard bytesPerWindow > 0 else { return }
        let loopBound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
        rateCheck = context.eventLoop.scheduleTask(in: rateWindow) {
            loopBound.value.handler.rateWindowEnded(context: loopBound.value.context)
        }
    }

    /// A window is over: a head or body that brought less than its share while billingd was
    /// reading is too slow; otherwise the next window starts.
    private func rateWindowEnded(context: ChannelHandlerContext) {
        rateCheck = nil
        guard phase == .head || phase == .body else { return }
        if readRequested, bytesThisWindow < bytesPerWindow {
            tooSlow(context: context, reason: "slower than the minimum transfer rate")
        } else {
            startRateWindow(context: context)
        }
    }

    private func deadlinePassed(context: ChannelHandlerContext) {
        deadline = nil
        tooSlow(context: context, reason: "not complete by its deadline")
    }

    /// Closes the connection whose head or body is too slow (after the answer in flight, if the
    /// late part is the next request's head); a route reading the body fails with ``RequestBodyTimeout``.
    private func tooSlow(context: ChannelHandlerContext, reason: String) {
        switch phase {
        case .head where openResponses > 0:
            // The next request is late while this one is answered: close after the answer.
            closeAfterResponse = true
            cancelDeadline()
        case .head:
            logger.debug("request head too slow, closing the connection", metadata: ["reason": "\(reason)"])
            metrics.count("billingd_http_slow_connections_closed_total", dimensions: [("part", "head")])
            phase = .failed
            cancelDeadline()
            context.close(promise: nil)
        case .body:
            logger.debug("request body too slow, closing the connection", metadata: ["reason": "\(reason)"])
            metrics.count("billingd_http_slow_connections_closed_total", dimensions: [("part", "body")])
            phase = .failed
            cancelDeadline()
            context.fireErrorCaught(RequestBodyTimeout())
            context.close(promise: nil)
        case .waiting, .failed:
            break
        }
    }
}

@available(*, unavailable)
extension RequestGuard: Sendable {}
