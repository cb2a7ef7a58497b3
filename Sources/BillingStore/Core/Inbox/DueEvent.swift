/// An event an applier is to apply now, with its body: what either backend's inbox hands its
/// applier, in commit order.
struct DueEvent: Sendable {
    let seq: Int64
    let eventID: String
    let account: String
    let livemode: Bool
    let type: String
    let created: Int64
    let apiVersion: String?
    let attempts: Int
    let source: InboxSource
    let body: [UInt8]
}

extension InboxEvent {
    /// The columns an ``InboxEvent`` is read from, in its order, on either backend.
    static let columns = """
        seq, eventID, account, livemode, type, subtype, apiVersion, created, objectID, objectType,
        receivedAt, source, status, attempts, lastError, effect
        """
}
