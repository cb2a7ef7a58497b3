import ArgumentParser
import BillingServer
import BillingStore
import Foundation

/// `billingd compact`: prunes the stored bodies retention allows, then gives the space back (issue 38).
struct Compact: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Prune superseded Stripe event bodies older than the retention window, compress old bodies, and reclaim the space.",
        discussion: """
            A body is pruned only when it no longer determines any state: a Stripe event older than the window (BILLINGD_RETENTION_BODIES, or --older-than), applied, about an object whose ledger row holds a newer snapshot from an event whose body is kept. The event's row stays, so a redelivery is still a duplicate; App Store bodies are never pruned; the ledger, usage, the outbox and the metrics do not change, and `billingd replay` rebuilds the same ledger. Bodies go in batches (one transaction each), so it can run beside `serve`, which does the same daily when BILLINGD_RETENTION_BODIES is set.

            Then the bodies stored before billingd compressed them (every ledger written before the inbox's body encoding) are compressed, in batches too, each row rewritten only if it is still uncompressed: a run stopped half-way resumes where it was. Every body reads back byte for byte as received.

            Then the space is reclaimed: on SQLite with PRAGMA incremental_vacuum, which shrinks a ledger created since retention exists (auto_vacuum=INCREMENTAL); an older ledger needs --full once, which runs VACUUM (it rewrites the file, needs as much free disk again and holds the write lock while it runs: stop serve first). On PostgreSQL with VACUUM of the bodies' table (--full: VACUUM FULL, which locks it).

            Progress goes to standard error on a terminal; the summary to standard output (--json for scripts). Exit 78 when there is no window (neither the setting nor --older-than) and no --full.
            """)

    @Flag(name: .long, help: "Count what would be pruned and compressed; change nothing.")
    var dryRun = false

    @Option(name: .long, help: ArgumentHelp("Prune bodies older than this many days instead of BILLINGD_RETENTION_BODIES (35d to 36500d).", valueName: "400d"))
    var olderThan: String?

    @Flag(name: .long, help: "Reclaim space fully: SQLite VACUUM (turns incremental auto-vacuum on for an older ledger), PostgreSQL VACUUM FULL.")
    var full = false

    @Flag(name: .long, help: "Print the summary as JSON.")
    var json = false

    @OptionGroup var global: GlobalOptions

    func validate() throws {
        if let olderThan, BodyRetentionWindow.parseDays(olderThan) == nil {
            throw ValidationError("--older-than \(olderThan) is not valid: expected \(BodyRetentionWindow.accepted).")
        }
    }

    func run() async throws {
        let settings = try global.settings()
        let days = olderThan.flatMap(BodyRetentionWindow.parseDays) ?? settings.database.retentionBodiesDays
        if days == nil, !full {
            throw CommandFailure.configuration(
                "Nothing to compact by: set BILLINGD_RETENTION_BODIES (such as 400d) or pass --older-than 400d; --full alone only reclaims space.")
        }
        try await global.withStore(settings) { store in
            let started = ContinuousClock.now
            let before = try await store.sizes().database
            var result = BodyPruneResult()
            if let days {
                result = try await store.retention.pruneBodies(
                    olderThan: BodyRetentionWindow.cutoff(days: days, now: Int64(Date().timeIntervalSince1970)), batchSize: 1000,
                    dryRun: dryRun
                ) { progress in
                    Output.progress("compact: \(progress.bodies) bodies \(dryRun ? "to prune" : "pruned") (\(Stats.readable(progress.bytes)))")
                }
                Output.endProgress()
            }
            let compressed = try await store.retention.compressBodies(batchSize: 1000, dryRun: dryRun) { progress in
                Output.progress("compact: \(progress.bodies) uncompressed bodies \(dryRun ? "found" : "compressed")")
            }
            Output.endProgress()
            let objects = try await store.retention.compressLedgerJSON(batchSize: 1000, dryRun: dryRun) { progress in
                Output.progress(
                    "compact: \(progress.inEventBodies) objects' raw JSON \(dryRun ? "found" : "kept") only in their event's body, "
                        + "\(progress.objects) stored uncompressed \(dryRun ? "found" : "compressed")")
            }
            Output.endProgress()
            if !dryRun {
                if Output.stderrIsTerminal { Output.note(full ? "compact: vacuuming the whole database…" : "compact: reclaiming free pages…") }
                try await store.retention.reclaimSpace(full: full)
            }
            let after = try await store.sizes().database
            let elapsed = ContinuousClock.now - started
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            if json {
                var summary: [String: Any] = [
                    "dry_run": dryRun, "full": full, "bodies_pruned": result.bodies, "body_bytes": result.bytes,
                    "bytes_before": before, "bytes_after": after, "seconds": seconds,
                    "bodies_uncompressed": compressed.bodies, "bodies_compressed": compressed.compressed,
                    "compressed_bytes_before": compressed.bytesBefore, "compressed_bytes_after": compressed.bytesAfter,
                    "objects_uncompressed": objects.objects, "objects_compressed": objects.compressed,
                    "objects_in_event_bodies": objects.inEventBodies,
                    "object_bytes_before": objects.bytesBefore, "object_bytes_after": objects.bytesAfter,
                ]
                if let days { summary["older_than_days"] = days }
                print(Output.json(summary))
                return
            }
            let window = days.map { "of Stripe events older than \($0) days" } ?? "(no retention window: space only)"
            if dryRun {
                print("Would prune \(result.bodies) bodies (\(Stats.readable(result.bytes))) \(window).")
                print("Would compress \(compressed.bodies) bodies stored uncompressed (\(Stats.readable(compressed.bytesBefore))).")
                print(
                    "Would keep the raw JSON of \(objects.inEventBodies) ledger objects only in the body of the event that wrote them, "
                        + "and compress that of \(objects.objects) stored uncompressed "
                        + "(\(Stats.readable(objects.bytesBefore)) in all); nothing was changed.")
            } else {
                print("Pruned \(result.bodies) bodies (\(Stats.readable(result.bytes))) \(window) in \(String(format: "%.1f", seconds)) s.")
                print(
                    "Compressed \(compressed.compressed) of \(compressed.bodies) bodies stored uncompressed: "
                        + "\(Stats.readable(compressed.bytesBefore)) → \(Stats.readable(compressed.bytesAfter)).")
                if !objects.alreadyDone {
                    print(
                        "Kept the raw JSON of \(objects.inEventBodies) ledger objects only in the body of the event that wrote them, "
                            + "and compressed that of \(objects.compressed) of \(objects.objects) stored uncompressed: "
                            + "\(Stats.readable(objects.bytesBefore)) → \(Stats.readable(objects.bytesAfter)).")
                }
                print("Database: \(Stats.readable(before)) before, \(Stats.readable(after)) after (\(before) → \(after) bytes).")
            }
        }
    }
}
