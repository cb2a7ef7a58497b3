import ArgumentParser
import BillingServer
import BillingStore
import Foundation

/// `billingd stats`: how much room the ledger takes and what it holds (issue 38).
struct Stats: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the ledger's size per table, its events per store and the bytes each event takes.",
        discussion: """
            Sizes are the pages each table and its indexes use (SQLite's dbstat, which reads the whole file; PostgreSQL's pg_total_relation_size). Events are counted per store (stripe, appstore) with the bodies retention pruned (BILLINGD_RETENTION_BODIES, `billingd compact`). Bytes per event is the whole database divided by the inbox's events: what a given event volume needs on disk. --json prints the same for scripts.
            """)

    @Flag(name: .long, help: "Print the figures as JSON.")
    var json = false

    @OptionGroup var global: GlobalOptions

    func run() async throws {
        let settings = try global.settings()
        try await global.withStore(settings) { store in
            let sizes = try await store.sizes()
            let counts = try await store.retention.eventCounts()
            let events = counts.values.reduce(0) { $0 + $1.events }
            let perEvent = events == 0 ? nil : Double(sizes.database) / Double(events)
            if json {
                var summary: [String: Any] = [
                    "database_bytes": sizes.database, "free_bytes": sizes.free, "tables": sizes.tables, "events": events,
                    "stores": counts.mapValues { ["events": $0.events, "bodies": $0.bodies, "bodies_pruned": $0.pruned] },
                ]
                if let perEvent { summary["bytes_per_event"] = Int64(perEvent.rounded()) }
                print(Output.json(summary))
                return
            }
            let tables = sizes.tables.filter { $0.value > 0 }.sorted { ($0.value, $1.key) > ($1.value, $0.key) }
            print(Output.table(["table", "bytes", "size"], tables.map { [$0.key, String($0.value), Self.readable($0.value)] }))
            print("")
            print(Output.table(
                ["store", "events", "bodies", "pruned"],
                counts.sorted { $0.key > $1.key }.map { [$0.key, String($0.value.events), String($0.value.bodies), String($0.value.pruned)] }))
            print("")
            print("Database: \(Self.readable(sizes.database)) (\(sizes.database) bytes), of which \(Self.readable(sizes.free)) free pages.")
            if let perEvent {
                print("Per event: \(Self.readable(Int64(perEvent.rounded()))) (\(Int64(perEvent.rounded())) bytes) over \(events) events.")
            } else {
                print("Per event: no events yet.")
            }
        }
    }

    /// Bytes as people read them: 512 B, 4.8 KiB, 1.2 MiB, 3.9 GiB.
    static func readable(_ bytes: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(bytes)
        var unit = 0
        while value >= 1024, unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return unit == 0 ? "\(bytes) B" : String(format: "%.1f %@", value, units[unit])
    }
}
