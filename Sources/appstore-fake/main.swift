import AppStoreFake
import ArgumentParser
import BillingCore
import BillingSamples
import Crypto
import Foundation
import Logging

/// Runs the App Store fake as a process, for benchmarks and trying billingd by hand.
struct AppStoreFakeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "appstore-fake",
        abstract: "A stateful fake of the App Store Server API on loopback.",
        discussion: """
            Serves Apple's App Store Server API endpoints (subscription statuses, transaction and refund \
            history, transaction info, order lookup, notification history, test notifications). Every \
            request must carry the JWT billingd signs with its .p8 key; anything wrong with it is answered \
            401 with an empty body, as Apple does, and logged (info level) with the reason: alg, kid, typ, signature, iss, aud, bid, \
            iat, exp or lifetime.

            Everything the fake signs chains to its own test root, not Apple's: pass \
            --root-certificate-out and point billingd at it (APPSTORE_ROOT_CERTIFICATES=PATH).

            Subscriptions renew on the fake's clock, which follows the wall clock: in Sandbox a month is \
            5 minutes, as in Apple's sandbox. Each change is POSTed to --notification-url as a Server \
            Notification V2.

            The first line on standard output is the bound URL: "listening on http://127.0.0.1:PORT". \
            On SIGTERM or SIGINT the fake stops and writes a last line, "served N requests": those whose \
            token it accepted, retries included.

            --seed-date seeds as of a past time, then lives the time since (renewals, expiries, their \
            notifications, recorded but not sent without --notification-url). The same --seed, \
            --seed-renewals and --seed-date give the same store, so a fake restarted later, say under \
            faketime a day on, is the first one a day older (scripts/bench-appstore-reconcile does this).
            """)

    @Option(help: "Address to listen on.") var host = "127.0.0.1"
    @Option(help: "Port to listen on; 0 picks a free one.") var port = 0
    @Option(help: "App Store Connect issuer id the JWT's iss must name.") var issuerID: String
    @Option(help: "Key id of billingd's .p8 key, the JWT header's kid.") var keyID: String
    @Option(help: "The app's bundle id: the JWT's bid and every transaction's bundleId.") var bundleID: String
    @Option(help: "PEM public key that verifies billingd's JWT.") var publicKey: String?
    @Option(help: "billingd's .p8 private key (PKCS#8 PEM); only its public half is used.") var privateKey: String?
    @Option(help: "Sandbox or Production.") var environment = "Sandbox"
    @Option(help: "The app's Apple ID (appAppleId).") var appAppleID: Int64?
    @Option(help: "Where to POST Server Notifications V2.") var notificationURL: String?
    @Option(help: "Original transactions to seed, each with a few renewals and its notification history.")
    var seed = 0
    @Option(help: "Renewals per seeded subscription.") var seedRenewals = 3
    @Option(help: "Seed as of this time (Unix seconds, not after now) instead of now, then catch up to now.")
    var seedDate: Int64?
    @Option(help: "Write the signing root certificate (DER) here, for APPSTORE_ROOT_CERTIFICATES.")
    var rootCertificateOut: String?
    @Option(help: "Keep the signing PKI in this file (made on first use), so the root stays the same across runs.")
    var pki: String?
    @Flag(help: "Keep every request for introspection (memory grows with traffic).") var recordRequests = false
    @Flag(help: "Log warnings and errors only.") var quiet = false
    @Option(help: "Log level when not --quiet: trace, debug, info, notice, warning, error, critical.")
    var logLevel = "info"

    func validate() throws {
        guard (publicKey == nil) != (privateKey == nil) else {
            throw ValidationError("Give exactly one of --public-key and --private-key.")
        }
        if let seedDate, seedDate * 1000 > Int64(Date().timeIntervalSince1970 * 1000) {
            throw ValidationError("--seed-date \(seedDate) is in the future; seed as of now or earlier.")
        }
        guard environment == "Sandbox" || environment == "Production" else {
            throw ValidationError("--environment is Sandbox or Production, not \(environment).")
        }
    }

    func run() async throws {
        var logger = Logger(label: "appstore-fake")
        logger.logLevel = quiet ? .warning : Logger.Level(rawValue: logLevel) ?? .info
        let key = try loadPublicKey()
        let fake = try await AppStoreFake.start(
            .init(
                issuerID: issuerID, keyID: keyID, bundleID: bundleID, publicKey: key,
                environment: AppStoreEnvironment(rawValue: environment), appAppleID: appAppleID,
                notificationURL: notificationURL, host: host, port: port, pki: try loadPKI(),
                recordsRequests: recordRequests, stopsOnSignals: true, logger: logger))
        if let rootCertificateOut {
            try Data(fake.pki.rootDER).write(to: URL(fileURLWithPath: rootCertificateOut))
        }
        if seed > 0 {
            let started = ContinuousClock.now
            let summary = await fake.seed(subscriptions: seed, renewals: seedRenewals, at: seedDate.map { $0 * 1000 })
            logger.info(
                "seeded",
                metadata: [
                    "subscriptions": "\(summary.subscriptions)", "transactions": "\(summary.transactions)",
                    "notifications": "\(summary.notifications)", "duration": "\(ContinuousClock.now - started)",
                ])
        }
        // Unbuffered, so that a script reading the pipe sees the line at once.
        FileHandle.standardOutput.write(Data("listening on \(fake.baseURL)\n".utf8))
        try await fake.waitUntilStopped()
        FileHandle.standardOutput.write(Data("served \(await fake.acceptedTokenCount) requests\n".utf8))
    }

    /// The PKI kept in `--pki`, made and written there on first use; nil without the option.
    private func loadPKI() throws -> AppStoreTestPKI? {
        guard let pki else { return nil }
        if FileManager.default.fileExists(atPath: pki) {
            return try AppStoreTestPKI(serialized: String(contentsOfFile: pki, encoding: .utf8))
        }
        let made = try AppStoreTestPKI()
        try Data(made.serialized().utf8).write(to: URL(fileURLWithPath: pki))
        return made
    }

    private func loadPublicKey() throws -> P256.Signing.PublicKey {
        if let publicKey {
            let pem = try String(contentsOfFile: publicKey, encoding: .utf8)
            do {
                return try P256.Signing.PublicKey(pemRepresentation: pem)
            } catch {
                throw ValidationError("\(publicKey) is not a PEM P-256 public key: \(error)")
            }
        }
        let path = privateKey ?? ""
        let pem = try String(contentsOfFile: path, encoding: .utf8)
        do {
            return try P256.Signing.PrivateKey(pemRepresentation: pem).publicKey
        } catch {
            throw ValidationError("\(path) is not a .p8 (PKCS#8 PEM) P-256 private key: \(error)")
        }
    }
}

// `main.swift` cannot use `@main`; parse and run the async command by hand.
do {
    let command = try AppStoreFakeCommand.parse()
    try await command.run()
} catch {
    AppStoreFakeCommand.exit(withError: error)
}
