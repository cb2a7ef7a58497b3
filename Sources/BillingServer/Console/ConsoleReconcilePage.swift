import BillingStore
import Foundation
import Hummingbird
import Logging
import ServiceLifecycle
import Synchronization

/// `/console/reconcile`: the recent reconcile runs with their drift reports and examples, and a
/// "dry run now" that starts a dry-run reconcile in the background (``ConsoleReconcileRunner``).
struct ConsoleReconcilePage {
    let console: ConsoleController

    func render(_ request: Request, csrf: String) async throws -> HTML {
        let runs = try await console.store.reconcileRuns.recent(limit: 20)
        var body: [HTML] = []
        if let runner = console.configuration.reconcile {
            let requested: HTML = runner.isBusy ? "<p class=\"notice\" id=\"dry-run-running\">A dry run is running; reload for its result.</p>" : .empty
            body.append("""
                \(requested)<form method="post" action="/console/reconcile/dry-run">\(ConsolePages.csrfField(csrf))\
                <button type="submit" id="dry-run">Dry run now</button> <span class="muted">compares the ledger with Stripe and repairs nothing</span></form>
                """)
        } else {
            body.append("<p class=\"muted\">No dry run from here: reconcile needs STRIPE_API_KEY.</p>")
        }
        let rows: [[HTML]] = runs.map { run in
            let outcome: HTML = switch run.outcome {
            case .completed: "<span class=\"tag good\">completed</span>"
            case .running: "<span class=\"tag\">running</span>"
            case .failed, .interrupted: "<span class=\"tag bad\">\(run.outcome.rawValue)</span>"
            }
            return ["\(run.id)", "\(run.mode)\(run.dryRun ? " (dry run)" : "")", outcome, "\(ConsoleFormat.time(run.startedAt))",
                    "\(ConsoleFormat.time(run.finishedAt))", "\(run.objects)", "\(run.drift)", "\(run.repaired)", ConsolePages.errorSummary(run.error)]
        }
        body.append("<h2>Recent runs</h2><section class=\"card\">\(ConsolePages.table(["Run", "Mode", "Outcome", "Started", "Finished", "Objects", "Drift", "Repaired", "Error"], rows, numeric: [0, 5, 6, 7], id: "runs", empty: "No reconcile has run yet."))</section>")
        for run in runs.prefix(5) where run.drift > 0 {
            guard let data = try await console.store.reconcileRuns.report(run.id),
                let report = try? JSONDecoder().decode(ReconcileReport.self, from: data)
            else { continue }
            let kinds: [[HTML]] = report.byKind.keys.sorted().compactMap { kind in
                guard let entry = report.byKind[kind], entry.drift > 0 else { return nil }
                let examples = entry.examples.map { "\($0.id) (\($0.drift.rawValue)\($0.fields.isEmpty ? "" : ": " + $0.fields.joined(separator: ", ")))" }
                return ["\(kind)", "\(entry.listed)", "\(entry.missingLocally)", "\(entry.goneInStripe)", "\(entry.fieldDiffers)", "\(entry.repaired)",
                        "<code>\(examples.joined(separator: "; "))</code>"]
            }
            body.append("""
                <h2>Drift of run \(run.id)</h2><section class="card">\
                \(ConsolePages.table(["Kind", "Listed", "Missing here", "Gone in Stripe", "Fields differ", "Repaired", "Examples"], kinds, numeric: [1, 2, 3, 4, 5], id: "drift-\(String(run.id))"))</section>
                """)
        }
        let notice = request.uri.queryParameters["notice"].flatMap { ["started": "Dry run started; reload for its result.", "busy": "A dry run is already running."][String($0)] }
        return ConsolePages.layout(.reconcile, title: "Reconcile", csrf: csrf, notice: notice, body: HTML(body))
    }

    func startDryRun() -> Response {
        guard let runner = console.configuration.reconcile else {
            return ConsoleController.page(ConsolePages.problem(status: .serviceUnavailable, message: "Reconcile needs STRIPE_API_KEY."), status: .serviceUnavailable)
        }
        return ConsoleController.redirect("/console/reconcile?notice=\(runner.request() ? "started" : "busy")")
    }
}

/// Runs the dry-run reconciles the console asks for, one at a time, as a service of the daemon:
/// a graceful shutdown stops the run in progress at its next page, as it stops the scheduler's.
public final class ConsoleReconcileRunner: Service, Sendable {
    private let reconciler: Reconciler
    private let logger: Logger
    private let requests: AsyncStream<Void>
    private let continuation: AsyncStream<Void>.Continuation
    private let busy = Mutex(false)

    public init(reconciler: Reconciler, logger: Logger) {
        self.reconciler = reconciler
        self.logger = logger
        (requests, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    /// Whether a dry run is asked for or running.
    public var isBusy: Bool { busy.withLock { $0 } }

    /// Asks for a dry run; false when one is already asked for or running.
    public func request() -> Bool {
        let started = busy.withLock { busy in
            if busy { return false }
            busy = true
            return true
        }
        if started { continuation.yield() }
        return started
    }

    public func run() async throws {
        for await _ in requests.cancelOnGracefulShutdown() {
            var options = Reconciler.Options()
            options.dryRun = true
            do {
                _ = try await reconciler.run(options)
            } catch is LeaseHeld {
                logger.info("console dry run skipped: another reconcile holds the lease")
            } catch {
                // Reconciler has logged the failure with its report, and recorded the run.
            }
            busy.withLock { $0 = false }
        }
    }
}
