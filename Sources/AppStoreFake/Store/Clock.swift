import Foundation
import Synchronization

extension AppStoreFake {
    /// The fake's notion of now, in Unix milliseconds (Apple's unit for every date): purchase and
    /// expiry dates, renewals, `signedDate`, notification history and send attempts all read it.
    /// Bearer tokens are checked against the wall clock instead, since billingd signs them with its own.
    public final class Clock: Sendable {
        private enum Mode {
            /// The wall clock plus an offset that ``advance(by:)`` grows.
            case system(offset: Int64)
            /// A fixed time that only ``advance(by:)`` and ``set(to:)`` move.
            case fixed(Int64)
        }

        private let mode: Mutex<Mode>

        /// Follows the wall clock.
        public init() { mode = Mutex(.system(offset: 0)) }

        /// Stands still at `now` (Unix milliseconds) until moved.
        public init(fixedAt now: Int64) { mode = Mutex(.fixed(now)) }

        public var now: Int64 {
            mode.withLock { mode in
                switch mode {
                case .system(let offset): Self.wallClock() + offset
                case .fixed(let now): now
                }
            }
        }

        /// Moves time by `milliseconds` (back, with a negative amount). Use ``AppStoreFake/advance(by:)``
        /// to also run the renewals and expiries that fall due.
        public func advance(by milliseconds: Int64) {
            mode.withLock { mode in
                switch mode {
                case .system(let offset): mode = .system(offset: offset + milliseconds)
                case .fixed(let now): mode = .fixed(now + milliseconds)
                }
            }
        }

        /// Jumps to `now` (Unix milliseconds), keeping the mode: a following clock keeps following from there.
        public func set(to now: Int64) {
            mode.withLock { mode in
                switch mode {
                case .system: mode = .system(offset: now - Self.wallClock())
                case .fixed: mode = .fixed(now)
                }
            }
        }

        /// The wall clock in Unix milliseconds.
        static func wallClock() -> Int64 { Int64((Date().timeIntervalSince1970 * 1000).rounded(.down)) }
    }
}
