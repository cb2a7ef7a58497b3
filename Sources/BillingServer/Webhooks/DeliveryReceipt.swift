import HTTPTypes
import Hummingbird
import NIOCore

/// The 2xx answer to a stored delivery: `{"duplicate":false,"id":"evt_…","received":true}`,
/// the same bytes `APIError.jsonResponse` writes with sorted keys, but put together from fixed
/// parts. Serialising a dictionary for every delivery cost 7 % of the server's CPU at full load.
enum DeliveryReceipt {
    private static let stored = Array(#"{"duplicate":false,"id":""#.utf8)
    private static let duplicate = Array(#"{"duplicate":true,"id":""#.utf8)
    private static let end = Array(#"","received":true}"#.utf8)

    static func response(id: String, duplicate isDuplicate: Bool) -> Response {
        let utf8 = id.utf8
        // An id that would need escaping (never one of Stripe's or Apple's) takes the general path.
        guard utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }) else {
            return APIError.jsonResponse(status: .ok, body: ["received": true, "duplicate": isDuplicate, "id": id])
        }
        let head = isDuplicate ? duplicate : stored
        var buffer = ByteBufferAllocator().buffer(capacity: head.count + utf8.count + end.count)
        buffer.writeBytes(head)
        buffer.writeBytes(utf8)
        buffer.writeBytes(end)
        return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: buffer))
    }
}
