import Foundation
import Testing

@testable import BillingServer

/// The settings table is the one list of billingd's variables (issue 36): the parser reads only
/// through it, and `--help`, the settings table of docs/configuration.md and the env example name
/// each of its variables. That page and the env example are written by hand; these tests keep
/// them complete.
@Suite("The settings table: the parser, --help, docs/configuration.md and the env example follow it")
struct SettingsTableTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let names = Settings.table.map(\.name)

    @Test("The parser reads every variable of the table and no other")
    func parserReadsTheTable() throws {
        #expect(Set(Self.names).count == Self.names.count, "a variable is in the table twice")
        for values in [[:], ["BILLINGD_DATABASE_URL": "postgres://billingd@db.example.com/ledger"]] {
            let reader = SettingsReader(values: values)
            _ = try Settings(reader: reader)
            let read = Set(reader.namesRead)
            #expect(read.subtracting(Self.names).sorted() == [], "read but not in SettingsTable.all")
            #expect(Set(Self.names).subtracting(read).sorted() == [], "in the table but never read")
        }
    }

    @Test("Every area has settings, and --help lists every variable with its default")
    func helpTable() {
        #expect(Set(Settings.table.map(\.area)) == Set(SettingsArea.allCases))
        let lines = Settings.helpTable.split(separator: "\n")
        #expect(lines.count == Settings.table.count)
        for (line, setting) in zip(lines, Settings.table) {
            #expect(line.hasPrefix("  \(setting.name) "))
            #expect(line.hasSuffix("[\(setting.shownDefault)]"))
        }
    }

    @Test("The token and secret minimum lengths are in their meanings")
    func minimumLengths() throws {
        let meaning = { (name: String) in Settings.table.first { $0.name == name }?.meaning ?? "" }
        #expect(meaning("BILLINGD_API_TOKENS").contains("at least 16 characters"))
        #expect(meaning("BILLINGD_METRICS_TOKEN").contains("at least 16 characters"))
        #expect(meaning("STRIPE_WEBHOOK_SECRET").contains("at least 8 characters"))
        #expect(meaning("BILLINGD_APP_WEBHOOK_SECRET").contains("at least 16 bytes"))
    }

    @Test("deploy/billingd.env.example lists every variable of the table (a commented-out line counts)")
    func environmentExampleIsComplete() throws {
        let listed = Set(try EnvironmentExampleTests.assignments().map(\.key))
        #expect(Set(Self.names).subtracting(listed).sorted() == [], "missing from deploy/billingd.env.example")
        #expect(listed.subtracting(Self.names).sorted() == [], "in deploy/billingd.env.example but not a setting")
    }

    @Test("The settings table of docs/configuration.md lists every variable of the table and no other")
    func configurationPageIsComplete() throws {
        let page = try String(contentsOf: Self.root.appendingPathComponent("docs/configuration.md"), encoding: .utf8)
        let section = try #require(page.components(separatedBy: "\n## Settings\n").dropFirst().first)
            .components(separatedBy: "\n## ")[0]
        var listed: [String] = []
        for line in section.split(separator: "\n") where line.hasPrefix("| `") {
            // The first cell: one variable, or several in backticks separated by commas.
            let cell = line.dropFirst(2).prefix { $0 != "|" }
            listed += cell.split(separator: "`").map(String.init).filter { $0.first?.isUppercase == true && $0.allSatisfy { $0.isUppercase || $0.isNumber || $0 == "_" } }
        }
        #expect(Set(listed).count == listed.count, "a variable is in docs/configuration.md's settings table twice")
        #expect(Set(Self.names).subtracting(listed).sorted() == [], "missing from docs/configuration.md's settings table")
        #expect(Set(listed).subtracting(Self.names).sorted() == [], "in docs/configuration.md's settings table but not a setting")
    }
}
