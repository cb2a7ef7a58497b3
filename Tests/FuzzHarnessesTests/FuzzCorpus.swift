import Foundation
import FuzzHarnesses
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The files the fuzz targets start from (`Fuzz/seeds.tsv`) and the inputs that once crashed
/// one (`Fixtures/fuzz-regressions/TARGET/`).
enum FuzzCorpus {
    /// The repository root: this file is three levels below it.
    static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent()
        .deletingLastPathComponent()
        .deletingLastPathComponent()

    enum Expectation: String {
        case accepted, rejected, any
    }

    struct Seed {
        let file: URL
        let expectation: Expectation
        /// The path from the repository root, for messages.
        var name: String { String(file.path.dropFirst(FuzzCorpus.root.path.count + 1)) }
    }

    /// Every seed of `target`, with what the target must answer for it.
    static func seeds(of target: FuzzTarget) throws -> [Seed] {
        let manifest = try String(contentsOf: root.appendingPathComponent("Fuzz/seeds.tsv"), encoding: .utf8)
        var seeds: [Seed] = []
        for line in manifest.split(separator: "\n") where !line.hasPrefix("#") {
            let fields = line.split(separator: "\t").map(String.init)
            guard fields.count == 3, fields[0] == target.rawValue else { continue }
            let expectation = try #require(Expectation(rawValue: fields[1]), "Fuzz/seeds.tsv: \(line)")
            let matches = try files(matching: fields[2])
            #expect(!matches.isEmpty, "Fuzz/seeds.tsv: \(fields[2]) matches no file")
            seeds += matches.map { Seed(file: $0, expectation: expectation) }
        }
        return seeds
    }

    /// The inputs that once crashed `target`, kept as regression tests.
    static func regressions(of target: FuzzTarget) throws -> [URL] {
        let directory = root.appendingPathComponent("Fixtures/fuzz-regressions/\(target.rawValue)")
        guard FileManager.default.fileExists(atPath: directory.path) else { return [] }
        return try FileManager.default.contentsOfDirectory(atPath: directory.path)
            .filter { !$0.hasPrefix(".") }
            .sorted()
            .map { directory.appendingPathComponent($0) }
    }

    /// The files a glob such as `Fixtures/objects/*.json` names (a wildcard in the last part only).
    static func files(matching glob: String) throws -> [URL] {
        let url = root.appendingPathComponent(glob)
        let directory = url.deletingLastPathComponent()
        let pattern = url.lastPathComponent
        guard FileManager.default.fileExists(atPath: directory.path) else { return [] }
        return try FileManager.default.contentsOfDirectory(atPath: directory.path)
            .filter { fnmatch(pattern, $0, 0) == 0 }
            .sorted()
            .map { directory.appendingPathComponent($0) }
    }

    static func bytes(_ file: URL) throws -> [UInt8] {
        Array(try Data(contentsOf: file))
    }
}
