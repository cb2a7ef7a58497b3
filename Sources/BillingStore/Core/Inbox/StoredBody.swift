import CZstd
import Synchronization

/// How an inbox body is kept on disk: the `encoding` column beside `inboxBody.body`, on both
/// backends. A tag in the body itself could be mistaken for a body's first bytes; a column cannot.
public enum BodyEncoding: Int, Sendable, CaseIterable {
    /// The bytes as received: rows written before bodies were compressed, and bodies that
    /// compressing would not make smaller.
    case verbatim = 0
    /// One zstd frame at level 3, its content size in the frame header and a checksum of the
    /// content at its end.
    case zstd = 1
}

/// A body as the inbox stores it. The bodies are JSON of a few kilobytes whose keys repeat from
/// one event to the next: on the benchmark's events (2 KB on average) zstd at level 3 keeps 46 %
/// of their size for about 12 µs a body with a reused context, and gives them back in 5 µs; zlib
/// at level 6 keeps 44 % for 42 µs with a reused stream and 107 µs without, and takes 12 µs to
/// inflate (scripts/bench/compression.c; docs/benchmarks.md, "Storage").
///
/// Compressing happens where a delivery is made (``InboxDelivery/init(envelope:body:receivedAt:source:secretIndex:subtype:verifiedAppStore:)``),
/// on the request's task, never inside the serial commit.
public struct StoredBody: Sendable, Equatable {
    public let bytes: [UInt8]
    public let encoding: BodyEncoding

    public init(bytes: [UInt8], encoding: BodyEncoding) {
        self.bytes = bytes
        self.encoding = encoding
    }

    /// `body` compressed, or verbatim when compressing would not make it smaller.
    public init(compressing body: [UInt8]) {
        if let compressed = Self.compress(body), compressed.count < body.count {
            self.init(bytes: compressed, encoding: .zstd)
        } else {
            self.init(bytes: body, encoding: .verbatim)
        }
    }

    /// The body as received.
    public func decoded() throws(StoredBodyError) -> [UInt8] {
        switch encoding {
        case .verbatim: bytes
        case .zstd: try Self.decompress(bytes)
        }
    }

    /// The body as received, from a row's `body` and `encoding` columns.
    public static func decode(_ bytes: [UInt8], encoding: Int) throws(StoredBodyError) -> [UInt8] {
        guard let encoding = BodyEncoding(rawValue: encoding) else { throw StoredBodyError("unknown body encoding \(encoding)") }
        return try StoredBody(bytes: bytes, encoding: encoding).decoded()
    }

    // MARK: zstd

    /// The compression level: 3, zstd's default, the best ratio per microsecond on these bodies.
    static let level: Int32 = 3

    /// The largest body a stored frame may claim: above any body billingd accepts (1 MiB over
    /// HTTP, a page of an API's answer), so that a corrupt header cannot ask for gigabytes.
    static let maximumDecodedSize = 64 << 20

    /// Compression contexts for reuse: creating one per body costs as much again as compressing.
    /// At most one per thread compressing at once is ever made; a few are kept.
    private static let contexts = Mutex<[CompressionContext]>([])

    private final class CompressionContext: @unchecked Sendable {
        let pointer: OpaquePointer
        init?() {
            guard let pointer = ZSTD_createCCtx() else { return nil }
            self.pointer = pointer
            // A checksum of the content in each frame: a body damaged on disk fails to read
            // rather than read back as other bytes.
            guard ZSTD_isError(ZSTD_CCtx_setParameter(pointer, ZSTD_c_compressionLevel, StoredBody.level)) == 0,
                ZSTD_isError(ZSTD_CCtx_setParameter(pointer, ZSTD_c_checksumFlag, 1)) == 0
            else { return nil }
        }
        deinit { ZSTD_freeCCtx(pointer) }
    }

    static func compress(_ body: [UInt8]) -> [UInt8]? {
        guard !body.isEmpty, let context = contexts.withLock({ $0.popLast() }) ?? CompressionContext() else { return nil }
        defer { contexts.withLock { if $0.count < 8 { $0.append(context) } } }
        let capacity = ZSTD_compressBound(body.count)
        let output = [UInt8](unsafeUninitializedCapacity: capacity) { buffer, count in
            let written = body.withUnsafeBytes { source in
                ZSTD_compress2(context.pointer, buffer.baseAddress, capacity, source.baseAddress, source.count)
            }
            count = ZSTD_isError(written) != 0 ? 0 : written
        }
        return output.isEmpty ? nil : output
    }

    static func decompress(_ frame: [UInt8]) throws(StoredBodyError) -> [UInt8] {
        let size = frame.withUnsafeBytes { ZSTD_getFrameContentSize($0.baseAddress, $0.count) }
        // ZSTD_CONTENTSIZE_UNKNOWN and ZSTD_CONTENTSIZE_ERROR are the two largest values.
        guard size < UInt64.max - 1 else { throw StoredBodyError("a stored body is not a zstd frame billingd wrote") }
        guard size <= UInt64(maximumDecodedSize) else { throw StoredBodyError("a stored body claims \(size) bytes") }
        guard size > 0 else { return [] }
        var failure: String?
        let body = [UInt8](unsafeUninitializedCapacity: Int(size)) { buffer, count in
            let written = frame.withUnsafeBytes { source in
                ZSTD_decompress(buffer.baseAddress, Int(size), source.baseAddress, source.count)
            }
            if ZSTD_isError(written) != 0 {
                failure = String(cString: ZSTD_getErrorName(written))
                count = 0
            } else {
                count = written
            }
        }
        if let failure { throw StoredBodyError("a stored body does not decompress: \(failure)") }
        guard body.count == Int(size) else { throw StoredBodyError("a stored body decompresses to \(body.count) of its \(size) bytes") }
        return body
    }
}

/// A stored body that cannot be read back: damaged on disk, or written by something else.
public struct StoredBodyError: Error, CustomStringConvertible, Sendable {
    public let description: String
    init(_ description: String) { self.description = description }
}
