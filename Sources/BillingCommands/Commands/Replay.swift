import ArgumentParser
import BillingCore
import BillingServer
import BillingStore
import Foundation

/// `billingd replay`: rebuild the ledger from the inbox.
struct Replay: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Rebuild the ledger from scratch by applying every stored event again.",
        discussion: """
            Empties the ledger tables and applies the inbox in commit order with the same rules as the live applier. Because the ordering rule does not depend on delivery order, the rebuilt ledger equals the live one; --verify checks that and exits 1 if it does not. Run it with `serve` stopped, or accept that the live applier works beside it.
            """)

    @Flag(name: .long, help: "Compare the rebuilt ledger with the one before, row for row.")
    var verify = false

    @Flag(name: .long, help: "Print the summary as JSON.")
    var json = false

    @OptionGroup var global: GlobalOptions

    func run() async throws {
        let settings = try global.settings()
        try await global.withStore(settings) { store in
            let maintenance = store.maintenance
            let before = verify ? try await maintenance.dump() : ""
            let total = try await store.inbox.count()
            let started = ContinuousClock.now
            let applier = store.applier(.init(batchSize: 1000, apiVersion: settings.stripe.apiVersion))
            let pass = try await maintenance.replay(applier: applier) { done in
                Output.progress("replay: \(done) / \(total) events")
            }
            Output.endProgress()
            let seconds = Double((ContinuousClock.now - started).components.attoseconds) / 1e18
                + Double((ContinuousClock.now - started).components.seconds)
            var identical: Bool?
            if verify { identical = try await maintenance.dump() == before }
            if json {
                var summary: [String: Any] = [
                    "processed": pass.processed, "applied": pass.applied, "stale": pass.stale, "ignored": pass.ignored,
                    "failed": pass.failed, "dead": pass.dead, "seconds": seconds,
                ]
                if let identical { summary["identical"] = identical }
                print(Output.json(summary))
            } else {
                print("Replayed \(pass.processed) events in \(String(format: "%.2f", seconds)) s: \(pass.applied) applied, \(pass.stale) older than the ledger's state, \(pass.ignored) ignored, \(pass.failed + pass.dead) failed.")
                if let identical {
                    print(identical ? "The rebuilt ledger is identical to the one before." : "The rebuilt ledger DIFFERS from the one before.")
                }
            }
            if identical == false { throw ExitCode(1) }
        }
    }
}
