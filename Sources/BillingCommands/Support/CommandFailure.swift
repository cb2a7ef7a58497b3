import ArgumentParser
import Foundation

/// A command whose options were fine but which could not do what was asked: it prints its
/// message without the usage text, and exits with a status that means one thing (docs/operations.md's
/// "Exit statuses"). Bad options stay `ValidationError`s: exit 64 with the usage hint.
struct CommandFailure: Error, CustomStringConvertible {
    /// The exit statuses, from BSD's sysexits where one fits.
    enum Kind: Int32 {
        /// The command ran and the answer is no: a refusal, a run that could not complete.
        case failed = 1
        /// The named object, event or file is not there (EX_NOINPUT).
        case notFound = 66
        /// A service the command talks to did not answer, e.g. `serve` for `trigger` (EX_UNAVAILABLE).
        case unavailable = 69
        /// An output file cannot be created: it exists, or its directory does not (EX_CANTCREAT).
        case cannotCreate = 73
        /// Reading or writing failed on the way, e.g. a backup that fails its integrity check (EX_IOERR).
        case ioError = 74
        /// A setting is missing, malformed, or names something unusable (EX_CONFIG).
        case configuration = 78
    }

    let kind: Kind
    let message: String

    init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    var description: String { message }

    static func configuration(_ message: String) -> CommandFailure { CommandFailure(.configuration, message) }
    static func notFound(_ message: String) -> CommandFailure { CommandFailure(.notFound, message) }
    static func cannotCreate(_ message: String) -> CommandFailure { CommandFailure(.cannotCreate, message) }

    /// Ends the process as `billingd`'s commands do: `Error: message` on standard error (its
    /// control characters escaped, see ``Output/printable(_:)``), then the status.
    func exit() -> Never {
        FileHandle.standardError.write(Data("Error: \(Output.printable(message))\n".utf8))
        Foundation.exit(kind.rawValue)
    }
}
