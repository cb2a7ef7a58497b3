import BillingCore
import Foundation

/// A verified body on its way in: the envelope the inbox indexes, the raw `data.object` the
/// ledger keeps, and the applier's decoding of that object by the event's type.
enum EventEnvelopeTarget {
    static func run(_ body: [UInt8]) -> FuzzVerdict {
        let envelope: EventEnvelope
        do {
            envelope = try EventEnvelope(decoding: body)
        } catch {
            // The locator runs on its own too: the applier calls it on stored bodies.
            _ = RawObjectLocator.objectRange(in: body)
            return .rejected
        }
        guard let range = RawObjectLocator.objectRange(in: body) else {
            return .violated("an envelope decoded, but data.object cannot be located")
        }
        guard range.lowerBound >= 0, range.upperBound <= body.count, !range.isEmpty else {
            return .violated("data.object's range \(range) lies outside the \(body.count)-byte body")
        }
        // The located bytes are the object the envelope was decoded from, read the same way.
        guard let located = try? JSONDecoder().decode(LocatedObject.self, from: Data(body[range])) else {
            return .violated("the located data.object is not a JSON object")
        }
        guard located.id == envelope.objectID, located.object == envelope.objectType else {
            return .violated("the located data.object is not the one the envelope read")
        }
        guard envelope.created >= 0, !envelope.id.isEmpty, !envelope.type.isEmpty else {
            return .violated("an envelope without an id, a type or a non-negative created time")
        }
        // Signed when it was created: never refused as created in the future.
        do {
            try envelope.checkCreated(signedAt: envelope.created, tolerance: 0)
        } catch {
            return .violated("an event signed at its own created time was refused as created later")
        }
        // The applier's step (SQLiteApplier.decode): route by type, decode the object.
        let routed: (kind: LedgerObjectKind, deletion: Bool)
        switch EventRoute(eventType: envelope.type) {
        case .snapshot(let kind): routed = (kind, false)
        case .deletion(let kind): routed = (kind, true)
        case .recordOnly, .refund, .refundSnapshot, .ignored: return .accepted
        }
        if let snapshot = try? LedgerSnapshot.decode(
            kind: routed.kind, deletion: routed.deletion, eventType: envelope.type, eventID: envelope.id,
            eventCreated: envelope.created, objectJSON: body[range])
        {
            guard snapshot.raw == body[range], !snapshot.objectID.isEmpty, snapshot.version.deleted || !routed.deletion else {
                return .violated("a snapshot does not keep the object's bytes, has no id, or outlives its deletion")
            }
        }
        return .accepted
    }

    /// What the envelope reads of `data.object`: members of the wrong type read as absent.
    private struct LocatedObject: Decodable {
        let id: String?
        let object: String?

        private enum CodingKeys: String, CodingKey { case id, object }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            id = try? container.decodeIfPresent(String.self, forKey: .id)
            object = try? container.decodeIfPresent(String.self, forKey: .object)
        }
    }
}
