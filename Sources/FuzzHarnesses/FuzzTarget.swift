import Dispatch
import Synchronization

/// The parsers that read what billingd does not control (issue 18), each run on raw bytes the
/// same way by libFuzzer (`Fuzz/`, `scripts/fuzz`) and by the regression suite that replays every
/// seed and every input that ever crashed one.
///
/// A target throws nothing and traps on nothing a parser may refuse: a refusal is ``FuzzVerdict/rejected``.
/// Only a crash, a leak, a hang, or a broken invariant (``FuzzVerdict/violated(_:)``) is a finding.
public enum FuzzTarget: String, CaseIterable, Sendable, CustomStringConvertible {
    /// `Stripe-Signature` parsing and HMAC verification; the input is the header, a newline, the body.
    case signature
    /// The event envelope, `data.object`'s location, and the applier's decoding by event type.
    case eventEnvelope = "event-envelope"
    /// Every object decoder of the ledger (``LedgerSnapshot/decode``), each kind on the same bytes.
    case ledgerObjects = "ledger-objects"
    /// The YAML plan catalog loader and its validation.
    case planCatalog = "plan-catalog"
    /// The Stripe client's form encoder; the input describes nested parameters.
    case stripeForm = "stripe-form"
    /// The Stripe client's list scanner.
    case stripeList = "stripe-list"
    /// App Store JWS verification (base64url, JSON, x5c, X.509/ASN.1, ES256) and the payload decoders.
    case appStoreJWS = "appstore-jws"
    /// StoreKit 1 app receipts: base64, PKCS#7 and the receipt's ASN.1 attributes.
    case appStoreReceipt = "appstore-receipt"
    /// The usage endpoints' JSON request bodies.
    case usageBody = "usage-body"

    public var description: String { rawValue }

    /// Runs the target on one input.
    public func run(_ input: [UInt8]) async -> FuzzVerdict {
        switch self {
        case .appStoreJWS: await AppStoreJWSTarget.run(input)
        default: runSynchronously(input)
        }
    }

    /// Runs the target on one input from a thread outside Swift's concurrency pool, as libFuzzer
    /// calls: the one asynchronous target is waited for.
    public func runBlocking(_ input: [UInt8]) -> FuzzVerdict {
        guard self == .appStoreJWS else { return runSynchronously(input) }
        let outcome = Outcome()
        let done = DispatchSemaphore(value: 0)
        Task {
            let verdict = await AppStoreJWSTarget.run(input)
            outcome.verdict.withLock { $0 = verdict }
            done.signal()
        }
        done.wait()
        return outcome.verdict.withLock { $0 } ?? .violated("the App Store target finished without a verdict")
    }

    private func runSynchronously(_ input: [UInt8]) -> FuzzVerdict {
        switch self {
        case .signature: SignatureTarget.run(input)
        case .eventEnvelope: EventEnvelopeTarget.run(input)
        case .ledgerObjects: LedgerObjectsTarget.run(input)
        case .planCatalog: PlanCatalogTarget.run(input)
        case .stripeForm: StripeFormTarget.run(input)
        case .stripeList: StripeListTarget.run(input)
        case .appStoreJWS: .violated("the App Store target is asynchronous")
        case .appStoreReceipt: AppStoreReceiptTarget.run(input)
        case .usageBody: UsageBodyTarget.run(input)
        }
    }

    private final class Outcome: Sendable {
        let verdict = Mutex<FuzzVerdict?>(nil)
    }
}

/// What one input did to a target.
public enum FuzzVerdict: Sendable, Equatable {
    /// The parser took the input (for the form encoder: encoded it and read it back).
    case accepted
    /// The parser refused the input with its own error, as it should refuse bad input.
    case rejected
    /// The parser answered, but its answer breaks a rule it promises: a finding, like a crash.
    case violated(String)
}

/// libFuzzer's entry point, shared by the executables in `Fuzz/`.
public enum FuzzEntry {
    /// `LLVMFuzzerTestOneInput` for `target`: a broken invariant traps, which libFuzzer reports
    /// and saves as a crash.
    public static func testOneInput(_ target: FuzzTarget, _ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
        let input = size > 0 && data != nil ? Array(UnsafeBufferPointer(start: data, count: size)) : []
        if case .violated(let rule) = target.runBlocking(input) {
            fatalError("fuzz target \(target): \(rule)")
        }
        return 0
    }
}
