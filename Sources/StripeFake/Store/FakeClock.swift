import Foundation
import Synchronization

/// The fake's notion of now, in Unix seconds: `created` of every object and event, the 30-day event
/// window, idempotency-key expiry and webhook signature timestamps all read it.
public final class FakeClock: Sendable {
    private enum Mode {
        /// The wall clock plus an offset that ``advance(by:)`` grows.
        case system(offset: Int64)
        /// A fixed time that only ``advance(by:)`` moves.
        case fixed(Int64)
    }

    private let mode: Mutex<Mode>

    /// Follows the wall clock.
    public init() { mode = Mutex(.system(offset: 0)) }

    /// Stands still at `now` (Unix seconds) until advanced.
    public init(fixedAt now: Int64) { mode = Mutex(.fixed(now)) }

    public var now: Int64 {
        mode.withLock { mode in
            switch mode {
            case .system(let offset): Int64(Date().timeIntervalSince1970) + offset
            case .fixed(let now): now
            }
        }
    }

    /// Moves time forward (or back, with a negative amount) by `seconds`.
    public func advance(by seconds: Int64) {
        mode.withLock { mode in
            switch mode {
            case .system(let offset): mode = .system(offset: offset + seconds)
            case .fixed(let now): mode = .fixed(now + seconds)
            }
        }
    }
}
