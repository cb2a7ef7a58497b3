import ArgumentParser
import BillingServer
import Foundation

/// The `billingd` command line: the daemon and the one-shot tools operators and cron run.
public struct Billingd: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "billingd",
        abstract: "Billing daemon for Stripe and the App Store: webhooks, one ledger, reconcile, and your app's entitlements.",
        discussion: """
            billingd receives Stripe's webhooks and Apple's App Store Server Notifications, keeps a local ledger of customers, subscriptions, invoices, payment methods and App Store transactions, repairs it against Stripe's API, and answers your app's backend.

            Settings come from environment variables, or from a KEY=VALUE file named by --config (the environment wins):

            \(Settings.helpTable)
            """,
        version: BillingdVersion.current,
        subcommands: [Serve.self, Reconcile.self, Trigger.self, Events.self, Replay.self, Inspect.self, Backup.self, Export.self, Checkout.self, Portal.self, Usage.self, AppStore.self, Outbox.self, Migrate.self, Copy.self, RevenueMetricsCommand.self, Timeline.self, Stats.self, Compact.self]
    )

    public init() {}

    /// ArgumentParser's `main`, except that a ``CommandFailure`` exits with its own status and
    /// no usage text.
    public static func main() async {
        do {
            var command = try parseAsRoot()
            if var asynchronous = command as? any AsyncParsableCommand {
                try await asynchronous.run()
            } else {
                try command.run()
            }
        } catch let failure as CommandFailure {
            failure.exit()
        } catch {
            // ArgumentParser's `exit(withError:)`, with the message's control characters escaped:
            // a bad option echoes what was typed, or what a script passed on from outside.
            let code = exitCode(for: error)
            let message = fullMessage(for: error)
            if code == .success {
                if !message.isEmpty { print(message) }  // --help, --version
            } else if !message.isEmpty {
                FileHandle.standardError.write(Data((Output.printable(message) + "\n").utf8))
            }
            Foundation.exit(code.rawValue)
        }
    }
}

/// The version `billingd --version` prints.
public enum BillingdVersion {
    public static let current = "0.1.0"
}
