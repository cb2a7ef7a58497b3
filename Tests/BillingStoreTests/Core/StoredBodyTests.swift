import BillingCore
@testable import BillingStore
import Foundation
import Testing

@Suite("Stored bodies: compressed on the way in, byte for byte on the way out, damage refused")
struct StoredBodyTests {
    /// An event around each committed Stripe object, as Stripe would send it.
    static var eventBodies: [(name: String, body: [UInt8])] {
        get throws {
            let names = try FileManager.default.contentsOfDirectory(atPath: EventFactory.root.appendingPathComponent("Fixtures/objects").path)
                .filter { $0.hasSuffix(".json") }.sorted()
            #expect(names.count >= 10)
            return names.map { name in
                let object = EventFactory.object(String(name.dropLast(5)))
                return (name, EventFactory.event(id: "evt_stored_\(name)", type: "x.updated", created: 1_767_225_600, object: object))
            }
        }
    }

    @Test("Every fixture event is stored compressed, smaller, and reads back byte for byte")
    func roundTrip() throws {
        var before = 0, after = 0
        for (name, body) in try Self.eventBodies {
            let stored = StoredBody(compressing: body)
            #expect(stored.encoding == .zstd, "\(name)")
            #expect(stored.bytes.count < body.count, "\(name)")
            #expect(try stored.decoded() == body, "\(name)")
            #expect(try StoredBody.decode(stored.bytes, encoding: stored.encoding.rawValue) == body, "\(name)")
            before += body.count
            after += stored.bytes.count
        }
        // zstd at level 3 keeps these at about 40 %; far above that, something else is stored.
        #expect(after * 2 < before, "\(after) of \(before) bytes")
    }

    @Test("A body compressing would not shrink, and an empty one, stay verbatim and read back as they are")
    func verbatim() throws {
        for body in [[], Array("{}".utf8), Array(#"{"id":"evt_1"}"#.utf8)] as [[UInt8]] {
            let stored = StoredBody(compressing: body)
            #expect(stored.encoding == .verbatim)
            #expect(stored.bytes == body)
            #expect(try stored.decoded() == body)
        }
        // A row written before bodies were compressed: encoding 0, the bytes as received.
        let old = Array(#"{"id":"evt_old","object":"event"}"#.utf8)
        #expect(try StoredBody.decode(old, encoding: 0) == old)
    }

    @Test("Bodies compressed at once on many tasks each read back as their own")
    func concurrent() async throws {
        let bodies = try Self.eventBodies.map(\.body)
        try await withThrowingTaskGroup(of: Bool.self) { group in
            for round in 0..<64 {
                let body = bodies[round % bodies.count]
                group.addTask { try StoredBody(compressing: body).decoded() == body }
            }
            for try await same in group { #expect(same) }
        }
    }

    @Test("A damaged, truncated or foreign frame, or an unknown encoding, is refused with a reason rather than read as other bytes")
    func damage() throws {
        let body = try #require(try Self.eventBodies.first?.body)
        let stored = StoredBody(compressing: body)
        try #require(stored.encoding == .zstd && stored.bytes.count > 20)

        var flipped = stored.bytes
        flipped[flipped.count / 2] ^= 0x5A
        #expect(throws: StoredBodyError.self) { try StoredBody(bytes: flipped, encoding: .zstd).decoded() }

        var checksum = stored.bytes
        checksum[checksum.count - 1] ^= 0x01
        #expect(throws: StoredBodyError.self) { try StoredBody(bytes: checksum, encoding: .zstd).decoded() }

        let truncated = Array(stored.bytes.prefix(stored.bytes.count - 8))
        #expect(throws: StoredBodyError.self) { try StoredBody(bytes: truncated, encoding: .zstd).decoded() }

        #expect(throws: StoredBodyError.self) { try StoredBody(bytes: body, encoding: .zstd).decoded() }
        #expect(throws: StoredBodyError.self) { try StoredBody.decode(stored.bytes, encoding: 7) }
    }
}
