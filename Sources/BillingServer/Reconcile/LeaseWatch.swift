import BillingStore
import Synchronization

/// Holds the reconcile lease for a run: renews it every quarter of its lifetime and, when it was
/// lost (expired and taken by another), says so; the walk stops at its next page.
final class LeaseWatch: Sendable {
    private let lost = Mutex(false)
    private let renewal = Mutex<Task<Void, Never>?>(nil)

    /// Takes the lease (throws ``LeaseHeld`` when another run holds it) and starts renewing it.
    static func hold(
        _ name: String, runs: any ReconcileRunStore, holder: String, ttl: Int64, now: @escaping @Sendable () -> Int64
    ) async throws -> LeaseWatch {
        try await runs.acquire(name, holder: holder, ttl: ttl, now: now())
        let watch = LeaseWatch()
        let task = Task { [watch] in
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(ttl / 4))
                guard !Task.isCancelled else { return }
                do {
                    try await runs.renew(name, holder: holder, ttl: ttl, now: now())
                } catch {
                    watch.markLost()
                    return
                }
            }
        }
        watch.renewal.withLock { $0 = task }
        return watch
    }

    func stopRenewing() { renewal.withLock { $0?.cancel() } }
    func markLost() { lost.withLock { $0 = true } }
    var isLost: Bool { lost.withLock { $0 } }

    /// Throws when the task was cancelled or the lease lost: a walk calls it before each page.
    func checkpoint() throws {
        try Task.checkCancellation()
        if isLost {
            throw LeaseHeld(holder: "another run (this run's lease expired)", acquiredAt: 0, expiresAt: 0)
        }
    }
}
