import Foundation
import FuzzHarnesses
import Testing

@Suite("Fuzz targets replay their seeds and every input that ever crashed them")
struct FuzzTargetTests {
    @Test("Each seed gets the answer Fuzz/seeds.tsv names, and breaks no invariant", arguments: FuzzTarget.allCases)
    func seeds(target: FuzzTarget) async throws {
        let seeds = try FuzzCorpus.seeds(of: target)
        #expect(seeds.count >= 3, "\(target) has \(seeds.count) seeds")
        for seed in seeds {
            let verdict = await target.run(try FuzzCorpus.bytes(seed.file))
            switch (verdict, seed.expectation) {
            case (.violated(let rule), _):
                Issue.record("\(seed.name): \(rule)")
            case (.accepted, .accepted), (.rejected, .rejected), (_, .any):
                break
            default:
                Issue.record("\(seed.name): \(verdict), expected \(seed.expectation.rawValue)")
            }
        }
    }

    @Test("Every input that once crashed a target runs clean", arguments: FuzzTarget.allCases)
    func regressions(target: FuzzTarget) async throws {
        for file in try FuzzCorpus.regressions(of: target) {
            if case .violated(let rule) = await target.run(try FuzzCorpus.bytes(file)) {
                Issue.record("Fixtures/fuzz-regressions/\(target)/\(file.lastPathComponent): \(rule)")
            }
        }
    }

    @Test("Fixtures/fuzz-regressions holds one folder per target and nothing else")
    func regressionFolders() throws {
        let folder = FuzzCorpus.root.appendingPathComponent("Fixtures/fuzz-regressions")
        guard FileManager.default.fileExists(atPath: folder.path) else { return }
        for name in try FileManager.default.contentsOfDirectory(atPath: folder.path) where !name.hasPrefix(".") {
            #expect(FuzzTarget(rawValue: name) != nil, "Fixtures/fuzz-regressions/\(name) is not a fuzz target's folder, so nothing replays it")
        }
    }

    @Test("Empty input is answered by every target, never trapped on", arguments: FuzzTarget.allCases)
    func emptyInput(target: FuzzTarget) async {
        // No parameters encode as "" and read back as none; every parser refuses nothing.
        #expect(await target.run([]) == (target == .stripeForm ? .accepted : .rejected))
    }

    @Test("libFuzzer's blocking entry gives the same verdict as the test's", arguments: FuzzTarget.allCases)
    func blockingEntry(target: FuzzTarget) async throws {
        guard let seed = try FuzzCorpus.seeds(of: target).first(where: { $0.expectation == .accepted }) else { return }
        let bytes = try FuzzCorpus.bytes(seed.file)
        // On a thread of its own, as libFuzzer calls it: blocking the concurrency pool could starve it.
        let blocking = await withCheckedContinuation { continuation in
            Thread { continuation.resume(returning: target.runBlocking(bytes)) }.start()
        }
        #expect(blocking == .accepted)
    }
}
