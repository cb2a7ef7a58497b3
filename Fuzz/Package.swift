// swift-tools-version:6.2
import PackageDescription

// libFuzzer executables, one per FuzzTarget, each a LLVMFuzzerTestOneInput over the harness in
// the root package. Apart from it because they link only with -sanitize=fuzzer (libFuzzer brings
// main); built and run by scripts/fuzz, never by `swift build` or CI.
let targets = [
    "signature", "event-envelope", "ledger-objects", "plan-catalog", "stripe-form", "stripe-list",
    "appstore-jws", "appstore-receipt", "usage-body",
]

let package = Package(
    name: "billingd-fuzz",
    platforms: [.macOS(.v15)],
    products: targets.map { .executable(name: "fuzz-\($0)", targets: ["fuzz-\($0)"]) },
    dependencies: [.package(name: "billingd", path: "..")],
    targets: targets.map {
        .executableTarget(
            name: "fuzz-\($0)",
            dependencies: [.product(name: "FuzzHarnesses", package: "billingd")],
            path: "Sources/fuzz-\($0)"
        )
    }
)
