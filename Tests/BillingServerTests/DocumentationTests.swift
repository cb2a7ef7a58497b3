import Foundation
import Testing

/// The README and `docs/` as a newcomer follows them: every relative link and every `scripts/…`
/// path they name exists, and every `billingd` command they show parses with the flags shown
/// (issue 37). Read from the repository this test file is in.
@Suite("Documentation: links, scripts and commands the README and docs/ show exist")
struct DocumentationTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// README.md and every Markdown file under docs/.
    static func documents() throws -> [URL] {
        var found = [root.appendingPathComponent("README.md")]
        let docs = root.appendingPathComponent("docs")
        if let walker = FileManager.default.enumerator(at: docs, includingPropertiesForKeys: nil) {
            for case let url as URL in walker where url.pathExtension == "md" { found.append(url) }
        }
        return found.sorted { $0.path < $1.path }
    }

    static func relative(_ url: URL) -> String {
        String(url.path.dropFirst(root.path.count + 1))
    }

    @Test("Every relative link in the README and docs/ names a file or directory that exists")
    func relativeLinks() throws {
        let link = /\]\(([^)\s]+)\)/
        var checked = 0
        for document in try Self.documents() {
            let text = try String(contentsOf: document, encoding: .utf8)
            for match in text.matches(of: link) {
                let target = String(match.1)
                if target.hasPrefix("#") || target.contains("://") || target.hasPrefix("mailto:") { continue }
                let path = String(target.split(separator: "#", maxSplits: 1)[0])
                let resolved = document.deletingLastPathComponent().appendingPathComponent(path).standardizedFileURL
                #expect(FileManager.default.fileExists(atPath: resolved.path), "\(Self.relative(document)) links to \(target), which does not exist")
                checked += 1
            }
        }
        #expect(checked > 0, "no relative link found: the pattern no longer matches the docs")
    }

    @Test("Every scripts/… path the README and docs/ name exists")
    func scriptPaths() throws {
        let script = /(?:^|[^\w\/.-])(scripts\/[A-Za-z0-9_.\/-]*[A-Za-z0-9_])/.anchorsMatchLineEndings()
        var checked = Set<String>()
        for document in try Self.documents() {
            let text = try String(contentsOf: document, encoding: .utf8)
            for match in text.matches(of: script) {
                let path = String(match.1)
                guard checked.insert(path).inserted else { continue }
                #expect(FileManager.default.fileExists(atPath: Self.root.appendingPathComponent(path).path), "\(Self.relative(document)) names \(path), which does not exist")
            }
        }
        #expect(checked.contains("scripts/test") && checked.contains("scripts/run"), "the README's two commands are not found: \(checked.sorted())")
    }

    /// One `billingd …` command line of a fenced code block: its words after `billingd`, with
    /// `\`-continued lines joined and a trailing `# comment` dropped.
    struct ShownCommand: CustomTestStringConvertible, Sendable {
        let document: String
        let words: [String]

        /// The subcommand path: the words before the first option.
        var subcommands: [String] { Array(words.prefix { !$0.hasPrefix("-") && !$0.hasPrefix("[") && !$0.hasPrefix("<") }) }
        /// Its long options, without values.
        var options: [String] {
            words.filter { $0.hasPrefix("--") && $0.count > 2 }.map { String($0.split(separator: "=", maxSplits: 1)[0]) }
        }
        var testDescription: String { "billingd " + words.joined(separator: " ") + " (\(document))" }
    }

    static func shownCommands() throws -> [ShownCommand] {
        var commands: [ShownCommand] = []
        for document in try documents() {
            var inBlock = false
            var pending = ""
            for line in try String(contentsOf: document, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false) {
                if line.trimmingCharacters(in: .whitespaces).hasPrefix("```") {
                    inBlock.toggle()
                    pending = ""
                    continue
                }
                guard inBlock else { continue }
                var text = pending + String(line)
                if text.hasSuffix("\\") {
                    text.removeLast()
                    pending = text + " "
                    continue
                }
                pending = ""
                if let comment = text.range(of: " #") { text = String(text[..<comment.lowerBound]) }
                var words = text.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
                // Environment assignments and a prompt before the command.
                while let first = words.first, first == "$" || (first.contains("=") && !first.hasPrefix("-")) { words.removeFirst() }
                guard let first = words.first, first == "billingd" || first.hasSuffix("/billingd") else { continue }
                words.removeFirst()
                guard !words.isEmpty else { continue }
                commands.append(ShownCommand(document: relative(document), words: words))
            }
        }
        return commands
    }

    @Test("Every billingd command the README and docs/ show parses, with every long option it shows", .needsBillingdBinary)
    func shownCommandsParse() async throws {
        let commands = try Self.shownCommands()
        #expect(commands.count >= 10, "only \(commands.count) commands found: the pattern no longer matches the docs")
        var helps: [[String]: (status: Int32, text: String)] = [:]
        for command in commands {
            let path = command.subcommands
            if helps[path] == nil {
                let result = try await billingd(path + ["--help"], environment: [:])
                helps[path] = (result.status, result.stdout + result.stderr)
            }
            let help = try #require(helps[path])
            #expect(help.status == 0, "\(command.testDescription): `billingd \(path.joined(separator: " ")) --help` exits \(help.status): \(help.text.prefix(300))")
            guard help.status == 0 else { continue }
            // `--help` answers even after an unknown word, with the help of the command it reached:
            // its USAGE line names that command (a group's default subcommand included), and
            // `<subcommand>` if it is a group. The words shown past it must be its arguments.
            let usage = help.text.split(separator: "\n").first { $0.hasPrefix("USAGE: billingd") }.map(String.init) ?? ""
            let reached = usage.split(separator: " ").dropFirst(2).prefix { !$0.hasPrefix("<") && !$0.hasPrefix("[") && !$0.hasPrefix("-") }.map(String.init)
            let extra = path.dropFirst(reached.count)
            let isDefaultSubcommand = reached.count == path.count + 1 && reached.starts(with: path)
            // A positional argument is a `<name>` or `[<name>]` that does not follow an option.
            let tokens = usage.split(separator: " ").map(String.init)
            let takesArguments = !usage.contains("<subcommand>") && tokens.indices.contains { index in
                (tokens[index].hasPrefix("<") || tokens[index].hasPrefix("[<")) && (index == 0 || !tokens[index - 1].contains("--"))
            }
            #expect(
                isDefaultSubcommand || (path.starts(with: reached) && (extra.isEmpty || takesArguments)),
                "\(command.testDescription): billingd has no command `\(path.joined(separator: " "))` (--help reached `\(usage)`)")
            for option in command.options where !help.text.contains(option) {
                Issue.record("\(command.testDescription): `billingd \(path.joined(separator: " "))` has no option \(option)")
            }
        }
    }
}
