/// How the fake delivers events to the webhook endpoint; tests change it to simulate Stripe's
/// failure modes: missed events, redeliveries, and events that arrive out of order.
public struct WebhookDeliveryPolicy: Sendable, Equatable {
    /// Hold every event until unpaused; they then go out in ``order``.
    public var isPaused = false
    /// Never deliver the next this-many events (they count as failed deliveries).
    public var dropNext = 0
    /// Never deliver events of these types.
    public var dropTypes: Set<String> = []
    /// Never deliver these events.
    public var dropEventIDs: Set<String> = []
    /// Deliver every event twice, as Stripe sometimes does.
    public var deliverTwice = false
    /// The order in which each batch of waiting events goes out.
    public var order: Order = .asCreated

    public enum Order: Sendable, Equatable {
        case asCreated
        /// Newest first: with ``isPaused`` then unpaused, every event arrives before the ones it follows.
        case reversed
    }

    public init() {}
}

/// Where an event is in delivery to the webhook endpoint.
public enum DeliveryStatus: Sendable, Equatable {
    /// No endpoint was configured when the event happened.
    case notSent
    case pending
    /// The endpoint answered 2xx.
    case delivered
    /// The endpoint answered something else (the status) or could not be reached (nil).
    case failed(status: Int?)
    /// The policy dropped it; it counts as a failure for `delivery_success=false`.
    case dropped

    /// The answer to the events list filter `delivery_success`; nil while pending or not sent.
    var succeeded: Bool? {
        switch self {
        case .delivered: true
        case .failed, .dropped: false
        case .notSent, .pending: nil
        }
    }
}

/// Where the fake sends events.
public struct WebhookEndpoint: Sendable, Equatable {
    public var url: String
    /// The endpoint's signing secret, `whsec_…`.
    public var secret: String

    public init(url: String, secret: String) {
        self.url = url
        self.secret = secret
    }
}
