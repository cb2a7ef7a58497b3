import Foundation

/// The parts of a Stripe event that the inbox indexes, decoded from the raw delivery.
///
/// Deliberately small and tolerant: any event type, any API version, any extra field decodes.
/// `data.object` is located, not decoded, here; the applier decodes it by type later.
public struct EventEnvelope: Sendable, Equatable {
    public let id: String
    public let type: String
    public let apiVersion: String?
    /// Unix seconds at which Stripe created the event.
    public let created: Int64
    public let livemode: Bool
    /// The connected account (Connect) the event belongs to; nil for the platform account.
    public let account: String?
    /// `data.object.id`; nil for objects without an id (e.g. `invoice.upcoming`).
    public let objectID: String?
    /// `data.object.object`, e.g. "subscription".
    public let objectType: String?

    public init(
        id: String, type: String, apiVersion: String?, created: Int64, livemode: Bool,
        account: String?, objectID: String?, objectType: String?
    ) {
        self.id = id
        self.type = type
        self.apiVersion = apiVersion
        self.created = created
        self.livemode = livemode
        self.account = account
        self.objectID = objectID
        self.objectType = objectType
    }

    /// Decodes the envelope of a delivery; throws ``EventDecodingError`` when the body is not
    /// a Stripe event, or not one the applier could read as it is stored: a byte order mark,
    /// bytes that are not UTF-8, a control character in a stored field, or a `data.object` that
    /// ``RawObjectLocator`` cannot find (or finds twice) are all refused here, before the 2xx.
    public init(decoding body: [UInt8]) throws(EventDecodingError) {
        if body.starts(with: [0xEF, 0xBB, 0xBF]) {
            throw .notAnEvent("the body starts with a UTF-8 byte order mark; Stripe's JSON has none")
        }
        if String(validating: body, as: UTF8.self) == nil {
            throw .notAnEvent("the body is not valid UTF-8")
        }
        let wire: Wire
        do {
            wire = try JSONDecoder().decode(Wire.self, fromUntrusted: body)
        } catch {
            throw .notAnEvent("the body is not a JSON Stripe event (\(Self.describe(error)))")
        }
        guard let id = wire.id, !id.isEmpty, id.utf8.count <= 255 else {
            throw .notAnEvent("the event has no id")
        }
        guard let type = wire.type, !type.isEmpty, type.utf8.count <= 255 else {
            throw .notAnEvent("the event has no type")
        }
        if let object = wire.object, object != "event" {
            throw .notAnEvent("the body is a \"\(object.prefix(40))\" object, not an event")
        }
        guard let created = wire.created else { throw .notAnEvent("the event has no created time") }
        guard created >= 0 else { throw .createdNegative(created) }
        guard wire.data != nil else { throw .notAnEvent("the event has no data.object") }
        let stored: [(String, String?)] = [
            ("id", id), ("type", type), ("api_version", wire.api_version), ("account", wire.account),
            ("data.object.id", wire.data?.object.id), ("data.object.object", wire.data?.object.object),
        ]
        for case let (name, value?) in stored {
            if let character = StoredText.firstControlCharacter(value) {
                throw .notAnEvent("the event's \(name) holds a control character (\(character)); Stripe's never do")
            }
        }
        guard RawObjectLocator.objectRange(in: body) != nil else {
            throw .notAnEvent("data.object is not a single member of a single data object")
        }
        self.init(
            id: id, type: type, apiVersion: wire.api_version, created: created,
            livemode: wire.livemode ?? false, account: wire.account,
            objectID: wire.data?.object.id, objectType: wire.data?.object.object)
    }

    /// Refuses an event created after it was signed: Stripe creates an event before it signs
    /// a delivery of it, so `created` is at most the signature's `t=` (plus the clock tolerance).
    /// A far-future `created` would win the ordering rule over every genuine later snapshot.
    public func checkCreated(signedAt timestamp: Int64, tolerance: Int64) throws(EventDecodingError) {
        let (latest, overflow) = timestamp.addingReportingOverflow(tolerance)
        if !overflow, created > latest {
            throw .createdInFuture(created: created, signedAt: timestamp, tolerance: tolerance)
        }
    }

    private static func describe(_ error: any Error) -> String {
        switch error {
        case DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context),
            DecodingError.keyNotFound(_, let context), DecodingError.dataCorrupted(let context):
            let path = context.codingPath.map(\.stringValue).joined(separator: ".")
            return path.isEmpty ? "invalid JSON" : "bad field \(path)"
        default:
            return "invalid JSON"
        }
    }

    private struct Wire: Decodable {
        struct DataField: Decodable {
            /// Only located here: an id or type that is not a string (a poison object)
            /// still leaves an envelope; whether the object can be applied is the applier's
            /// decoding to say (the webhook refuses one that cannot, invariant 9).
            struct Object: Decodable {
                let id: String?
                let object: String?

                private enum CodingKeys: String, CodingKey { case id, object }

                init(from decoder: any Decoder) throws {
                    let container = try decoder.container(keyedBy: CodingKeys.self)
                    id = try? container.decodeIfPresent(String.self, forKey: .id)
                    object = try? container.decodeIfPresent(String.self, forKey: .object)
                }
            }
            let object: Object
        }
        let id: String?
        let object: String?
        let type: String?
        let api_version: String?
        let created: Int64?
        let livemode: Bool?
        let account: String?
        let data: DataField?
    }
}

/// Why a verified body could not be taken as a Stripe event; each case has a stable code for
/// the JSON error body.
public enum EventDecodingError: Error, Sendable, Equatable {
    case notAnEvent(String)
    /// `created` is negative.
    case createdNegative(Int64)
    /// `created` is later than the signature's timestamp plus the tolerance.
    case createdInFuture(created: Int64, signedAt: Int64, tolerance: Int64)

    /// A stable, machine-readable reason.
    public var code: String {
        switch self {
        case .notAnEvent, .createdNegative: "not_an_event"
        case .createdInFuture: "event_created_in_future"
        }
    }

    public var message: String {
        switch self {
        case .notAnEvent(let reason): "Not a Stripe event: \(reason)."
        case .createdNegative(let created): "Not a Stripe event: its created time (\(created)) is before 1970."
        case .createdInFuture(let created, let signedAt, let tolerance):
            "The event's created time (\(created)) is after its signature's timestamp (\(signedAt)) plus the \(tolerance) s tolerance; Stripe signs an event after it creates it."
        }
    }
}
