extension AppStoreFake {
    /// How the fake sends notifications to the notification URL; tests change it to play Apple's
    /// failure modes: notifications that never arrive, arrive twice, late, or out of order.
    public struct DeliveryPolicy: Sendable, Equatable {
        /// Hold every notification until unpaused; they then go out in ``order``.
        public var isPaused = false
        /// Never send the next this-many notifications; each records one failed attempt.
        public var dropNext = 0
        /// Never send notifications of these `notificationType`s.
        public var dropTypes: Set<String> = []
        /// What a dropped notification's send attempt records.
        public var dropResult: SendAttemptResult = .noResponse
        /// Send every notification twice (two attempts in its history).
        public var deliverTwice = false
        /// Wait this long (real time) before each send.
        public var delay: Duration = .zero
        /// The order in which each batch of waiting notifications goes out.
        public var order: Order = .asCreated

        public enum Order: Sendable, Equatable {
            case asCreated
            /// Newest first: with ``isPaused`` then unpaused, each arrives before the ones it follows.
            case reversed
        }

        public init() {}
    }
}
