import BillingCore
import BillingStore
import BillingTestSupport
import Foundation
#if canImport(Glibc)
import Glibc
#endif
// libc's `struct stat` counts as CoreFoundation's here (see AtomicExportFile.swift).
#if canImport(CoreFoundation)
import CoreFoundation
#endif
import Testing

/// Runs the built `billingd` (`swift build` first; BILLINGD_BINARY overrides) the way finance's
/// cron job does.
struct ExportProcess {
    static var binaryPath: String {
        if let path = ProcessInfo.processInfo.environment["BILLINGD_BINARY"] { return path }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        return root.appendingPathComponent(".build/debug/billingd").path
    }

    let process: ChildProcess
    let standardError: URL

    static func start(database: String, arguments: [String], directory: URL) throws -> ExportProcess {
        guard FileManager.default.isExecutableFile(atPath: binaryPath) else {
            throw ExportProcessError("billingd binary not found at \(binaryPath): run `swift build` before `swift test` (scripts/test does)")
        }
        let standardError = directory.appendingPathComponent("stderr-\(UUID().uuidString).txt")
        let process = try ChildProcess.start(
            binaryPath, arguments,
            environment: ChildProcess.environment(clearingBillingdSettings: false, ["BILLINGD_DATABASE": database, "BILLINGD_LOG_LEVEL": "warning"]),
            standardError: standardError.path)
        return ExportProcess(process: process, standardError: standardError)
    }

    /// Runs to the end; the exit status and what it wrote on standard error.
    static func run(database: String, arguments: [String], directory: URL) async throws -> (status: Int32, errors: String) {
        let running = try start(database: database, arguments: arguments, directory: directory)
        let termination = await running.process.wait()
        return (termination.status, running.errors)
    }

    var errors: String { (try? String(contentsOf: standardError, encoding: .utf8)) ?? "" }
}

struct ExportProcessError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

@Suite("billingd export invoices, the command", .serialized)
struct ExportProcessTests {
    /// The temporary files an export in `directory` may be writing (`.NAME.billingd-….tmp`).
    func temporaryFiles(_ directory: URL) throws -> [URL] {
        try FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: [.fileSizeKey], options: [])
            .filter { $0.lastPathComponent.hasPrefix(".") && $0.lastPathComponent.contains(".billingd-") }
    }

    /// Waits until an export's temporary file holds at least `bytes`, i.e. the export is mid-write.
    /// Polls on a thread of its own every 2 ms, not on the cooperative pool: in a full run on two
    /// busy cores a task polling there woke too late, after the whole export (a fresh clone's CI run).
    func waitForPartialWrite(in directory: URL, bytes: Int, process: ChildProcess) async throws {
        let tests = self
        let outcome: String? = await withCheckedContinuation { continuation in
            Thread {
                let deadline = Date().addingTimeInterval(12)
                while Date() < deadline {
                    if let file = try? tests.temporaryFiles(directory).first,
                        let size = try? file.resourceValues(forKeys: [.fileSizeKey]).fileSize, size >= bytes
                    {
                        return continuation.resume(returning: nil)
                    }
                    guard process.isRunning else { return continuation.resume(returning: "the export finished before it could be interrupted") }
                    usleep(2_000)
                }
                continuation.resume(returning: "the export never started writing")
            }.start()
        }
        if let outcome { throw ExportProcessError(outcome) }
    }

    @Test("--output gets exactly the exporter's bytes; the summary goes to stderr or --summary-json")
    func writesFileAndSummary() async throws {
        let ledger = try ExportLedger()
        defer { ledger.remove() }
        try ledger.insert([
            LedgerInvoice(id: "in_1", customerName: "=1+1", currency: "usd", subtotal: 1234, created: 1_767_225_600),
            LedgerInvoice(id: "in_2", currency: "jpy", subtotal: 500, created: 1_767_225_601),
            LedgerInvoice(id: "in_3", currency: "kwd", subtotal: 1005, created: 1_769_904_000),
        ])
        let database = ledger.path("ledger.sqlite3")
        let output = ledger.path("january.csv")
        let run = try await ExportProcess.run(
            database: database, arguments: ["export", "invoices", "--from", "2026-01", "--to", "2026-02", "--output", output],
            directory: ledger.directory)
        #expect(run.status == 0, "\(run.errors)")
        let expected = try await SQLiteInvoiceExporter(database: ledger.database)
            .exportText(.init(createdFrom: 1_767_225_600, createdBefore: 1_769_904_000)).0
        #expect(try String(contentsOfFile: output, encoding: .utf8) == expected)
        #expect(run.errors.contains("Exported 2 invoices to \(output)"))
        #expect(run.errors.contains("usd       1         12.34"))
        #expect(run.errors.contains("jpy       1         500"))
        #expect(try temporaryFiles(ledger.directory).isEmpty)

        // JSON Lines, inferred from the name, with the summary as JSON.
        let jsonl = ledger.path("all.jsonl")
        let summary = ledger.path("summary.json")
        let second = try await ExportProcess.run(
            database: database, arguments: ["export", "invoices", "--output", jsonl, "--summary-json", summary],
            directory: ledger.directory)
        #expect(second.status == 0, "\(second.errors)")
        #expect(try jsonRows(try String(contentsOfFile: jsonl, encoding: .utf8)).count == 3)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: summary))) as? [String: Any])
        #expect(object["invoices"] as? Int == 3)
        #expect(object["format"] as? String == "jsonl")
        #expect(!second.errors.contains("Exported"))

        // Test mode holds nothing here: the summary says so and points at --test.
        let empty = try await ExportProcess.run(
            database: database, arguments: ["export", "invoices", "--output", ledger.path("none.csv")], directory: ledger.directory)
        #expect(empty.status == 0)
        let none = try await ExportProcess.run(
            database: database, arguments: ["export", "invoices", "--test", "--force", "--output", ledger.path("none.csv")],
            directory: ledger.directory)
        #expect(none.status == 0)
        #expect(none.errors.contains("No invoices matched (test mode"))
        #expect(try String(contentsOfFile: ledger.path("none.csv"), encoding: .utf8) == InvoiceExportSchema.invoiceColumns.joined(separator: ",") + "\r\n")
    }

    @Test("Bad options are refused with a message that names them, and no file is written", arguments: [
        (["--from", "last-month"], "--from \"last-month\" is not an instant"),
        (["--from", "2026-02", "--to", "2026-01"], "The range is empty"),
        (["--test", "--livemode"], "--test"),
        (["--format", "xlsx"], "xlsx"),
        (["--format", "jsonl", "--bom"], "byte order mark"),
        (["--currency", "euros"], "ISO 4217"),
        (["--output", "/nonexistent-billingd-dir/out.csv"], "does not exist"),
    ])
    func badOptions(arguments: [String], message: String) async throws {
        let ledger = try ExportLedger()
        defer { ledger.remove() }
        var options = ["export", "invoices"] + arguments
        if !arguments.contains("--output") { options += ["--output", ledger.path("out.csv")] }
        let run = try await ExportProcess.run(database: ledger.path("ledger.sqlite3"), arguments: options, directory: ledger.directory)
        #expect(run.status != 0)
        #expect(run.errors.contains(message), "\(run.errors)")
        #expect(!FileManager.default.fileExists(atPath: ledger.path("out.csv")))
    }

    @Test("An existing file is replaced only with --force (exit 73 without); a FIFO or a symbolic link is refused either way and left as it was")
    func existingTargets() async throws {
        let ledger = try ExportLedger()
        defer { ledger.remove() }
        try ledger.insert([LedgerInvoice(id: "in_1", currency: "usd", subtotal: 1234, created: 1_767_225_600)])
        let database = ledger.path("ledger.sqlite3")
        let existing = ledger.path("existing.csv")
        try Data("keep me".utf8).write(to: URL(fileURLWithPath: existing))
        let refused = try await ExportProcess.run(database: database, arguments: ["export", "invoices", "--output", existing], directory: ledger.directory)
        #expect(refused.status == 73, "\(refused.errors)")
        #expect(refused.errors.contains("--force"), "\(refused.errors)")
        #expect(try String(contentsOfFile: existing, encoding: .utf8) == "keep me")
        let summary = ledger.path("summary.json")
        try Data("{}".utf8).write(to: URL(fileURLWithPath: summary))
        let summaryRefused = try await ExportProcess.run(
            database: database, arguments: ["export", "invoices", "--output", ledger.path("new.csv"), "--summary-json", summary],
            directory: ledger.directory)
        #expect(summaryRefused.status == 73, "\(summaryRefused.errors)")
        #expect(!FileManager.default.fileExists(atPath: ledger.path("new.csv")), "refused before anything was written")
        let forced = try await ExportProcess.run(
            database: database, arguments: ["export", "invoices", "--force", "--output", existing], directory: ledger.directory)
        #expect(forced.status == 0, "\(forced.errors)")
        #expect(try String(contentsOfFile: existing, encoding: .utf8).contains("in_1"))

        let fifo = ledger.path("pipe.csv")
        #expect(mkfifo(fifo, 0o600) == 0)
        let link = ledger.path("link.csv")
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: existing)
        for target in [fifo, link] {
            for force in [false, true] {
                let run = try await ExportProcess.run(
                    database: database, arguments: ["export", "invoices", "--output", target] + (force ? ["--force"] : []),
                    directory: ledger.directory)
                #expect(run.status == 73, "\(target) --force \(force): \(run.errors)")
                #expect(run.errors.contains("regular files only"), "\(run.errors)")
            }
        }
        var status = stat()
        #expect(lstat(fifo, &status) == 0 && (status.st_mode & S_IFMT) == S_IFIFO, "the FIFO is still a FIFO")
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: link) == existing, "the link is still a link")
        #expect(try temporaryFiles(ledger.directory).isEmpty)
    }

    @Test("kill -9 mid-export never leaves a partial file: the output is absent, or the previous complete one", arguments: [false, true])
    func killNineMidExport(previousExport: Bool) async throws {
        let ledger = try ExportLedger()
        defer { ledger.remove() }
        try ledger.generate(count: 100_000, lines: false)
        let database = ledger.path("ledger.sqlite3")
        let output = ledger.path("invoices.csv")
        var previous: Data?
        if previousExport {
            let small = try await ExportProcess.run(
                database: database, arguments: ["export", "invoices", "--to", "1767225700", "--output", output], directory: ledger.directory)
            #expect(small.status == 0, "\(small.errors)")
            previous = try Data(contentsOf: URL(fileURLWithPath: output))
            #expect(previous?.count ?? 0 > 1000)
        }

        let export = try ExportProcess.start(
            database: database, arguments: ["export", "invoices", "--force", "--output", output], directory: ledger.directory)
        try await waitForPartialWrite(in: ledger.directory, bytes: 1 << 20, process: export.process)
        try await Task.sleep(for: .milliseconds(Int.random(in: 0...150)))
        export.process.signal(SIGKILL)
        #expect(await export.process.wait() == .signal(SIGKILL))

        if let previous {
            #expect(try Data(contentsOf: URL(fileURLWithPath: output)) == previous, "the previous export is untouched")
        } else {
            #expect(!FileManager.default.fileExists(atPath: output), "no half-written export under the final name")
        }
        // What kill -9 leaves is the hidden temporary file, partial and clearly named as such.
        #expect(try temporaryFiles(ledger.directory).count == 1)

        // The next export replaces everything with a complete file.
        let complete = try await ExportProcess.run(
            database: database, arguments: ["export", "invoices", "--force", "--output", output], directory: ledger.directory)
        #expect(complete.status == 0, "\(complete.errors)")
        let text = try String(contentsOfFile: output, encoding: .utf8)
        #expect(text.hasSuffix("\r\n"))
        #expect(text.components(separatedBy: "\r\n").count == 100_000 + 2)
        #expect(text.contains("1,in_gen_00099999,"))
    }

    @Test("SIGTERM or SIGINT mid-export stops cleanly: no output file and no temporary file", arguments: [SIGTERM, SIGINT])
    func signalMidExport(signal: Int32) async throws {
        let ledger = try ExportLedger()
        defer { ledger.remove() }
        try ledger.generate(count: 100_000, lines: false)
        let output = ledger.path("invoices.csv")
        let export = try ExportProcess.start(
            database: ledger.path("ledger.sqlite3"), arguments: ["export", "invoices", "--output", output], directory: ledger.directory)
        try await waitForPartialWrite(in: ledger.directory, bytes: 1 << 20, process: export.process)
        export.process.signal(signal)
        #expect(await export.process.wait() == .exit(128 + signal), "billingd ends an interrupted export with 128 + the signal")
        #expect(export.errors.contains("interrupted"))
        #expect(!FileManager.default.fileExists(atPath: output))
        #expect(try temporaryFiles(ledger.directory).isEmpty)
    }
}
