import ArgumentParser
import BillingCommands

/// The entry point only hands the process to the command line in BillingCommands.
@main
enum BillingdEntry {
    static func main() async {
        // The annotation picks AsyncParsableCommand's async `main`, which runs async commands.
        let run: () async -> Void = Billingd.main
        await run()
    }
}
