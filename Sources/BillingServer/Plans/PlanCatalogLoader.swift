import BillingCore
import Foundation
import Yams

/// Reads the plan catalog file named by `BILLINGD_PLANS` (YAML: comments matter in a file an
/// operator edits) and validates it, so that a bad catalog stops start-up with a message that
/// names the file, the line, the path of the key and what is expected there.
public enum PlanCatalogLoader {
    /// The catalog in the file at `path`.
    public static func load(path: String) throws(PlanCatalogLoadError) -> PlanCatalog {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            let reason = FileManager.default.fileExists(atPath: path) ? "it cannot be read (check its permissions)" : "no such file"
            // A relative path is resolved in the working directory, which differs between a
            // shell, systemd and cron: say where it was looked for.
            let resolved = path.hasPrefix("/")
                ? "" : " (looked for \(URL(fileURLWithPath: path).standardizedFileURL.path), relative to the working directory \(FileManager.default.currentDirectoryPath))"
            throw PlanCatalogLoadError(
                path: path, line: nil, column: nil,
                message: "\(reason)\(resolved); BILLINGD_PLANS must name a readable YAML plan catalog\(resolved.isEmpty ? "" : ", best by its absolute path")")
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw PlanCatalogLoadError(path: path, line: nil, column: nil, message: "the file is not UTF-8 text")
        }
        return try parse(text, path: path)
    }

    /// The catalog in `text`, a YAML document; `path` only names it in errors.
    public static func parse(_ text: String, path: String = "plans.yaml") throws(PlanCatalogLoadError) -> PlanCatalog {
        let root: Node
        do {
            guard let node = try Yams.compose(yaml: text) else {
                throw PlanCatalogLoadError(path: path, line: nil, column: nil, message: "the file is empty; it needs tiers: with at least the default tier (id: free)")
            }
            root = node
        } catch let error as PlanCatalogLoadError {
            throw error
        } catch let error as YamlError {
            throw syntaxError(error, path: path)
        } catch {
            throw PlanCatalogLoadError(path: path, line: nil, column: nil, message: "not valid YAML: \(error)")
        }

        let problem: PlanCatalogError
        do {
            let document = try YAMLDecoder().decode(PlanCatalogDocument.self, from: root)
            return try PlanCatalog(document: document)
        } catch let error as PlanCatalogError {
            problem = error
        } catch let error as DecodingError {
            problem = PlanCatalogError(decoding: error)
        } catch {
            problem = PlanCatalogError([], "\(error)")
        }
        let mark = Self.mark(of: problem.path, in: root)
        throw PlanCatalogLoadError(
            path: path, line: mark?.line, column: mark?.column, message: "\(problem.pathDescription): \(problem.message)")
    }

    /// Where the value at `path` is written, or its nearest ancestor that is.
    static func mark(of path: [PlanCatalogError.PathComponent], in root: Node) -> Mark? {
        var node = root
        var mark = root.mark
        for component in path {
            switch (component, node) {
            case (.key(let key), .mapping(let mapping)):
                guard let pair = mapping.first(where: { $0.key.string == key }) else { return mark }
                // Where the key is written: the value of a mapping or list starts on a later line.
                mark = pair.key.mark ?? pair.value.mark ?? mark
                node = pair.value
            case (.index(let index), .sequence(let sequence)):
                guard sequence.indices.contains(index) else { return mark }
                node = sequence[index]
                mark = node.mark ?? mark
            default:
                return mark
            }
        }
        return mark
    }

    private static func syntaxError(_ error: YamlError, path: String) -> PlanCatalogLoadError {
        switch error {
        case .scanner(let context, let problem, let mark, _), .parser(let context, let problem, let mark, _),
            .composer(let context, let problem, let mark, _):
            let detail = [context?.text, problem].compactMap { $0 }.filter { !$0.isEmpty }.joined(separator: " ")
            return PlanCatalogLoadError(path: path, line: mark.line, column: mark.column, message: "not valid YAML: \(detail)")
        case .duplicatedKeysInMapping(let duplicates, let context):
            return PlanCatalogLoadError(
                path: path, line: context.mark.line, column: context.mark.column,
                message: "a key is written twice in the same mapping (\(duplicates.sorted().joined(separator: ", "))); each key may appear once")
        default:
            return PlanCatalogLoadError(path: path, line: nil, column: nil, message: "not valid YAML: \(error)")
        }
    }
}

/// Why the plan catalog could not be loaded: `FILE:LINE:COLUMN: PATH: what is expected`.
public struct PlanCatalogLoadError: Error, Sendable, Equatable, CustomStringConvertible {
    public let path: String
    public let line: Int?
    public let column: Int?
    /// The key's path and the problem, e.g. `tiers[2].limits.seats: "many" is not a limit; …`.
    public let message: String

    public var description: String {
        var location = path
        if let line { location += ":\(line)" }
        if let column, line != nil { location += ":\(column)" }
        return "Plan catalog (BILLINGD_PLANS) \(location): \(message)"
    }
}
