import ArgumentParser
import BillingServer
import BillingStore
import Foundation

/// `billingd inspect`: the ledger's view of one object.
struct Inspect: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the ledger's view of an object as JSON, with the events that shaped it.",
        discussion: "Works for any id the ledger keeps: cus_…, sub_…, in_…, pm_…, price_…, prod_…, cs_…; for active entitlements, the customer id finds the summary. An App Store original transaction id gives the subscription with its transactions, renewal info and owner; any other transaction id gives that transaction.")

    @Argument(help: ArgumentHelp("A Stripe object id, or an App Store (original) transaction id.", valueName: "id"))
    var id: String

    @OptionGroup var global: GlobalOptions

    func run() async throws {
        let settings = try global.settings()
        try await global.withStore(settings) { store in
            guard let view = try await store.maintenance.inspect(id: id) else {
                throw CommandFailure.notFound("The ledger has no object \(id). `billingd events --object \(id)` shows whether any event mentioned it.")
            }
            print(Output.json(view))
        }
    }
}
