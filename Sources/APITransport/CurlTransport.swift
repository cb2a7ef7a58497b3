import CCurl
import Foundation
import Synchronization

/// `HTTPTransport` over libcurl's easy interface.
///
/// `curl_easy_perform` blocks, so transfers never run on Swift's cooperative pool: each runs on
/// one of at most `maxConnections` dedicated threads, each owning one easy handle that is reset,
/// not recreated, between transfers so that its connection cache keeps connections alive. Callers
/// beyond `maxConnections` wait in FIFO order. A cancelled caller leaves the queue at once, or
/// stops its running transfer within about a second (libcurl's progress callback).
public final class CurlTransport: HTTPTransport {
    /// At most this many transfers in flight, and so at most this many threads and easy handles.
    public let maxConnections: Int
    private let queue: TransferQueue

    public init(maxConnections: Int = 8) {
        precondition(maxConnections >= 1, "CurlTransport needs at least one connection")
        precondition(CurlGlobal.isInitialized, "curl_global_init failed")
        self.maxConnections = maxConnections
        queue = TransferQueue(maxWorkers: maxConnections)
    }

    deinit {
        queue.shutDown()
    }

    public func perform(_ request: HTTPTransportRequest) async throws(HTTPTransportError) -> HTTPTransportResponse {
        let job = TransferJob(request: request)
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                queue.submit(job, continuation)
            }
        } onCancel: {
            queue.cancel(job)
        }
        return try result.get()
    }
}

/// `curl_global_init` exactly once per process, before the first easy handle.
private enum CurlGlobal {
    static let isInitialized: Bool = curl_global_init(Int(CURL_GLOBAL_ALL)) == CURLE_OK
}

/// One caller's transfer; shared between the caller's task and a worker thread.
final class TransferJob: Sendable {
    let request: HTTPTransportRequest
    /// Set when the caller's task is cancelled; read by the worker's progress callback.
    let cancelled = Atomic<Bool>(false)

    init(request: HTTPTransportRequest) { self.request = request }

    var isCancelled: Bool { cancelled.load(ordering: .relaxed) }
}

typealias TransferContinuation = CheckedContinuation<Result<HTTPTransportResponse, HTTPTransportError>, Never>

/// The FIFO of waiting transfers and the worker threads that drain it.
///
/// `@unchecked Sendable`: every stored `var` is read and written only while `condition` is locked,
/// and each continuation is resumed exactly once — by `cancel` if the job is still pending, by
/// `submit` if the job was cancelled or the queue shut down before it was queued, otherwise by the
/// worker that dequeued it. These three are mutually exclusive under the lock.
final class TransferQueue: @unchecked Sendable {
    private let condition = NSCondition()
    private let maxWorkers: Int
    private var pending: [(job: TransferJob, continuation: TransferContinuation)] = []
    private var workers = 0
    private var idleWorkers = 0
    private var isShutDown = false

    init(maxWorkers: Int) { self.maxWorkers = maxWorkers }

    func submit(_ job: TransferJob, _ continuation: TransferContinuation) {
        condition.lock()
        defer { condition.unlock() }
        if job.isCancelled || isShutDown {
            continuation.resume(returning: .failure(.other("transfer cancelled before it started")))
            return
        }
        pending.append((job, continuation))
        if pending.count > idleWorkers, workers < maxWorkers {
            workers += 1
            let thread = Thread { [self] in CurlWorker(queue: self).run() }
            thread.name = "billingd-curl-\(workers)"
            thread.start()
        } else {
            condition.signal()
        }
    }

    func cancel(_ job: TransferJob) {
        condition.lock()
        defer { condition.unlock() }
        job.cancelled.store(true, ordering: .relaxed)
        if let index = pending.firstIndex(where: { $0.job === job }) {
            let removed = pending.remove(at: index)
            removed.continuation.resume(returning: .failure(.other("transfer cancelled while waiting for a connection")))
        }
    }

    /// Hands back the worker's finished transfer, if any, then blocks the worker until there is a
    /// job; nil tells the worker to exit. The worker counts as idle before its caller resumes, so
    /// that caller's next request goes to this handle and its open connection, not to a new thread.
    func next(
        finishing finished: (continuation: TransferContinuation, result: Result<HTTPTransportResponse, HTTPTransportError>)?
    ) -> (job: TransferJob, continuation: TransferContinuation)? {
        condition.lock()
        defer { condition.unlock() }
        idleWorkers += 1
        if let finished { finished.continuation.resume(returning: finished.result) }
        while pending.isEmpty, !isShutDown {
            condition.wait()
        }
        idleWorkers -= 1
        guard !pending.isEmpty else {
            workers -= 1
            return nil
        }
        return pending.removeFirst()
    }

    func shutDown() {
        condition.lock()
        defer { condition.unlock() }
        isShutDown = true
        for waiting in pending {
            waiting.continuation.resume(returning: .failure(.other("transport shut down")))
        }
        pending.removeAll()
        condition.broadcast()
    }
}

/// One worker thread's easy handle and error buffer; used from that thread only.
private final class CurlWorker {
    private let queue: TransferQueue

    init(queue: TransferQueue) { self.queue = queue }

    func run() {
        guard let handle = curl_easy_init() else {
            var finished: (TransferContinuation, Result<HTTPTransportResponse, HTTPTransportError>)?
            while let (_, continuation) = queue.next(finishing: finished) {
                finished = (continuation, .failure(.other("curl_easy_init failed")))
            }
            return
        }
        let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
        defer {
            errorBuffer.deallocate()
            curl_easy_cleanup(handle)
        }
        var finished: (TransferContinuation, Result<HTTPTransportResponse, HTTPTransportError>)?
        while let (job, continuation) = queue.next(finishing: finished) {
            let result: Result<HTTPTransportResponse, HTTPTransportError>
            if job.isCancelled {
                result = .failure(.other("transfer cancelled before it started"))
            } else {
                result = Self.perform(job, on: handle, errorBuffer: errorBuffer)
            }
            finished = (continuation, result)
        }
    }

    private static func perform(
        _ job: TransferJob, on handle: UnsafeMutableRawPointer, errorBuffer: UnsafeMutablePointer<CChar>
    ) -> Result<HTTPTransportResponse, HTTPTransportError> {
        let request = job.request
        for header in request.headers
        where header.name.utf8.contains(where: isLineBreak) || header.value.utf8.contains(where: isLineBreak) {
            return .failure(.other("header \(header.name.filter { $0 != "\r" && $0 != "\n" }) contains a line break"))
        }

        // Keeps the connection, DNS and TLS-session caches; forgets every option.
        curl_easy_reset(handle)
        errorBuffer[0] = 0
        let state = TransferState(policy: request.responseBody)
        var headerList: UnsafeMutablePointer<curl_slist>?
        defer { curl_slist_free_all(headerList) }
        for header in request.headers {
            headerList = curl_slist_append(headerList, "\(header.name): \(header.value)")
        }
        // No "Expect: 100-continue" round trip before small bodies.
        headerList = curl_slist_append(headerList, "Expect:")

        var setup = SetupResult()
        setup.check(billingd_curl_setopt_pointer(handle, CURLOPT_ERRORBUFFER, errorBuffer))
        setup.check(billingd_curl_setopt_string(handle, CURLOPT_URL, request.url))
        setup.check(billingd_curl_setopt_string(handle, CURLOPT_PROTOCOLS_STR, "http,https"))
        setup.check(billingd_curl_setopt_long(handle, CURLOPT_NOSIGNAL, 1))
        setup.check(billingd_curl_setopt_long(handle, CURLOPT_SSL_VERIFYPEER, 1))
        setup.check(billingd_curl_setopt_long(handle, CURLOPT_SSL_VERIFYHOST, 2))
        setup.check(billingd_curl_setopt_long(handle, CURLOPT_FOLLOWLOCATION, 0))
        setup.check(billingd_curl_setopt_long(handle, CURLOPT_TCP_KEEPALIVE, 1))
        if request.responseBody.decompresses {
            // Every encoding libcurl decodes; the body limit counts decoded bytes.
            setup.check(billingd_curl_setopt_string(handle, CURLOPT_ACCEPT_ENCODING, ""))
        } else {
            // No Accept-Encoding, and a compressed answer sent anyway is kept as it came.
            setup.check(billingd_curl_setopt_long(handle, CURLOPT_HTTP_CONTENT_DECODING, 0))
        }
        setup.check(billingd_curl_setopt_long(handle, CURLOPT_CONNECTTIMEOUT_MS, milliseconds(request.connectTimeout)))
        setup.check(billingd_curl_setopt_long(handle, CURLOPT_TIMEOUT_MS, milliseconds(request.timeout)))
        setup.check(billingd_curl_setopt_slist(handle, CURLOPT_HTTPHEADER, headerList))
        let context = Unmanaged.passUnretained(state).toOpaque()
        setup.check(billingd_curl_setopt_callback(handle, CURLOPT_WRITEFUNCTION, { data, size, count, context in
            let state = Unmanaged<TransferState>.fromOpaque(context!).takeUnretainedValue()
            let length = size * count
            guard let data, length > 0 else { return length }
            return state.receive(UnsafeRawBufferPointer(start: data, count: length))
        }))
        setup.check(billingd_curl_setopt_pointer(handle, CURLOPT_WRITEDATA, context))
        setup.check(billingd_curl_setopt_callback(handle, CURLOPT_HEADERFUNCTION, { data, size, count, context in
            let state = Unmanaged<TransferState>.fromOpaque(context!).takeUnretainedValue()
            let length = size * count
            if let data, length > 0 {
                state.headerLine(UnsafeRawBufferPointer(start: data, count: length))
            }
            return length
        }))
        setup.check(billingd_curl_setopt_pointer(handle, CURLOPT_HEADERDATA, context))
        setup.check(billingd_curl_setopt_long(handle, CURLOPT_NOPROGRESS, 0))
        setup.check(billingd_curl_setopt_xferinfo(handle, CURLOPT_XFERINFOFUNCTION, { context, _, _, _, _ in
            Unmanaged<TransferJob>.fromOpaque(context!).takeUnretainedValue().isCancelled ? 1 : 0
        }))
        setup.check(billingd_curl_setopt_pointer(handle, CURLOPT_XFERINFODATA, Unmanaged.passUnretained(job).toOpaque()))
        switch request.method {
        case .get:
            setup.check(billingd_curl_setopt_long(handle, CURLOPT_HTTPGET, 1))
        case .post:
            setup.check(billingd_curl_setopt_long(handle, CURLOPT_POST, 1))
        case .put:
            // The body goes as POSTFIELDS below, under the PUT verb (curl's UPLOAD would read it
            // from a callback instead).
            setup.check(billingd_curl_setopt_string(handle, CURLOPT_CUSTOMREQUEST, "PUT"))
        case .delete:
            setup.check(billingd_curl_setopt_string(handle, CURLOPT_CUSTOMREQUEST, "DELETE"))
        }
        let sendsBody = request.method == .post || request.method == .put || !request.body.isEmpty
        if sendsBody {
            // COPYPOSTFIELDS copies the bytes now, so no pointer outlives this call's buffer.
            setup.check(billingd_curl_setopt_off_t(handle, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(request.body.count)))
            setup.check(request.body.withUnsafeBufferPointer { body in
                // An empty body still needs a non-null pointer.
                var empty: CChar = 0
                return body.baseAddress.map { billingd_curl_setopt_pointer(handle, CURLOPT_COPYPOSTFIELDS, UnsafeMutableRawPointer(mutating: $0)) }
                    ?? billingd_curl_setopt_pointer(handle, CURLOPT_COPYPOSTFIELDS, &empty)
            })
        }
        if let failed = setup.failure {
            return .failure(.other("could not set up the transfer: \(String(cString: curl_easy_strerror(failed)))"))
        }

        let code = withExtendedLifetime((state, job)) { curl_easy_perform(handle) }
        // Stopped on purpose at the kept prefix: the answer is complete enough.
        guard code == CURLE_OK || (code == CURLE_WRITE_ERROR && state.isTruncated) else {
            var message = String(cString: errorBuffer)
            if message.isEmpty { message = String(cString: curl_easy_strerror(code)) }
            if code == CURLE_ABORTED_BY_CALLBACK { message = "transfer cancelled" }
            if state.isTooLarge {
                message = "answer larger than \(request.responseBody.maximumBytes) bytes"
            }
            return .failure(transportError(code, message))
        }
        var status = 0
        _ = billingd_curl_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &status)
        return .success(HTTPTransportResponse(status: status, headers: state.headers, body: state.body, bodyTruncated: state.isTruncated))
    }

    private static func isLineBreak(_ byte: UInt8) -> Bool { byte == 0x0A || byte == 0x0D }

    /// A duration in whole milliseconds for libcurl, at least 1 (0 would mean "no limit").
    private static func milliseconds(_ duration: Duration) -> Int {
        let (seconds, attoseconds) = duration.components
        let total = seconds.multipliedReportingOverflow(by: 1000)
        guard !total.overflow else { return Int.max }
        return max(1, Int(total.partialValue + attoseconds / 1_000_000_000_000_000))
    }

    /// Sorts libcurl's result codes into what a retry policy needs to know.
    static func transportError(_ code: CURLcode, _ message: String) -> HTTPTransportError {
        switch code {
        case CURLE_OPERATION_TIMEDOUT:
            .timedOut(message)
        case CURLE_COULDNT_CONNECT, CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY:
            .couldNotConnect(message)
        case CURLE_GOT_NOTHING, CURLE_RECV_ERROR, CURLE_SEND_ERROR, CURLE_PARTIAL_FILE, CURLE_HTTP2_STREAM, CURLE_HTTP2:
            .connectionLost(message)
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER,
            CURLE_SSL_CACERT_BADFILE, CURLE_SSL_ENGINE_NOTFOUND, CURLE_SSL_ENGINE_SETFAILED, CURLE_SSL_ENGINE_INITFAILED,
            CURLE_SSL_SHUTDOWN_FAILED, CURLE_SSL_CRL_BADFILE, CURLE_SSL_ISSUER_ERROR, CURLE_SSL_PINNEDPUBKEYNOTMATCH,
            CURLE_SSL_INVALIDCERTSTATUS, CURLE_SSL_CLIENTCERT, CURLE_USE_SSL_FAILED:
            .tls(message)
        default:
            .other(message)
        }
    }
}

/// Remembers the first option that libcurl refused.
private struct SetupResult {
    var failure: CURLcode?

    mutating func check(_ code: CURLcode) {
        if code != CURLE_OK, failure == nil { failure = code }
    }
}

/// What one transfer has received so far; touched only by the worker thread running it.
private final class TransferState {
    let policy: ResponseBodyPolicy
    var body: [UInt8] = []
    var headers: [String: String] = [:]
    /// The body passed the limit of a policy that fails.
    var isTooLarge = false
    /// The body passed the limit of a policy that truncates: what fit is kept, the rest unread.
    var isTruncated = false

    init(policy: ResponseBodyPolicy) { self.policy = policy }

    /// Keeps a chunk of the body within the policy's limit; the byte count libcurl expects, or 0
    /// to stop the transfer.
    func receive(_ chunk: UnsafeRawBufferPointer) -> Int {
        let room = policy.maximumBytes - body.count
        guard chunk.count > room else {
            body.append(contentsOf: chunk)
            return chunk.count
        }
        if policy.truncates {
            body.append(contentsOf: chunk.prefix(max(0, room)))
            isTruncated = true
        } else {
            isTooLarge = true
        }
        return 0
    }

    /// One header line as libcurl delivers it, CRLF included. A status line starts a new
    /// response (after a redirect or a 100 Continue), so only the final response's headers stay.
    func headerLine(_ line: UnsafeRawBufferPointer) {
        if line.starts(with: "HTTP/".utf8) {
            headers.removeAll()
            return
        }
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > 0 else { return }
        let name = String(decoding: line[..<colon], as: UTF8.self).lowercased()
        var value = line[(colon + 1)...]
        while let first = value.first, first == 0x20 || first == 0x09 { value = value.dropFirst() }
        while let last = value.last, last == 0x20 || last == 0x09 || last == 0x0A || last == 0x0D { value = value.dropLast() }
        let text = String(decoding: value, as: UTF8.self)
        if let existing = headers[name] {
            headers[name] = "\(existing), \(text)"
        } else {
            headers[name] = text
        }
    }
}
