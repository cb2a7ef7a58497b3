import ArgumentParser
import Foundation
import Logging
import StripeFake

/// Runs the Stripe fake as a process, for scripts/bench-reconcile and trying billingd by hand.
struct StripeFakeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stripe-fake",
        abstract: "A stateful fake of the Stripe API on loopback, optionally seeded.")

    @Option(help: "Address to listen on.") var host = "127.0.0.1"
    @Option(help: "Port to listen on; 0 picks a free one.") var port = 0
    @Option(help: "The secret key clients must present.") var apiKey = "sk_test_fake_0123456789"
    @Option(help: "Where to POST events (signed); needs --webhook-secret.") var webhookURL: String?
    @Option(help: "The webhook endpoint's signing secret (whsec_…).") var webhookSecret: String?
    @Option(help: "Customers to seed.") var customers = 0
    @Option(help: "Subscriptions to seed.") var subscriptions = 0
    @Option(help: "Invoices to seed.") var invoices = 0
    @Option(help: "Prices to seed.") var prices = 0
    @Option(help: "Products to seed.") var products = 0
    @Option(help: "Seed of the generated data; the same seed gives the same data.") var seed: UInt64 = 42
    @Flag(help: "Emit (and deliver) an event for every seeded object.") var seedEvents = false
    @Flag(help: "Keep every request for introspection (memory grows with traffic).") var recordRequests = false
    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical.") var logLevel = "info"

    func run() async throws {
        var logger = Logger(label: "stripe-fake")
        logger.logLevel = Logger.Level(rawValue: logLevel) ?? .info
        if webhookURL != nil, webhookSecret == nil {
            throw ValidationError("--webhook-url needs --webhook-secret")
        }
        let fake = try await StripeFake.start(
            .init(
                apiKey: apiKey, webhookURL: webhookURL, webhookSecret: webhookSecret, host: host, port: port,
                recordsRequests: recordRequests, stopsOnSignals: true, logger: logger))
        if customers + subscriptions + invoices + prices + products > 0 {
            let started = ContinuousClock.now
            let summary = await fake.seed(
                customers: customers, subscriptions: subscriptions, invoices: invoices, prices: prices,
                products: products, seed: seed, emitEvents: seedEvents)
            logger.info(
                "seeded",
                metadata: [
                    "products": "\(summary.products)", "prices": "\(summary.prices)",
                    "customers": "\(summary.customers)",
                    "subscriptions": "\(summary.subscriptions)", "invoices": "\(summary.invoices)",
                    "events": "\(summary.events)", "duration": "\(ContinuousClock.now - started)",
                ])
        }
        // Unbuffered, so that a script reading the pipe sees the line at once.
        FileHandle.standardOutput.write(Data("listening on \(fake.baseURL)\n".utf8))
        try await fake.waitUntilStopped()
    }
}

// `main.swift` cannot use `@main`; parse and run the async command by hand.
do {
    let command = try StripeFakeCommand.parse()
    try await command.run()
} catch {
    StripeFakeCommand.exit(withError: error)
}
