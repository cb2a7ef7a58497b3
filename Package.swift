// swift-tools-version:6.2
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "billingd",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "billingd", targets: ["billingd"]),
        .library(name: "BillingCore", targets: ["BillingCore"]),
        .library(name: "BillingStore", targets: ["BillingStore"]),
        // For the libFuzzer executables in Fuzz/, a package of their own (see scripts/fuzz).
        .library(name: "FuzzHarnesses", targets: ["FuzzHarnesses"]),
    ],
    dependencies: [
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.3"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-async-algorithms.git", from: "1.1.4"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/yaslab/CSV.swift.git", from: "2.5.2"),
        .package(url: "https://github.com/jpsim/Yams.git", from: "6.2.2"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.7.4"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
    ],
    targets: [
        // Pure logic: signatures (Stripe's HMAC, Apple's JWS chains), event decoding, ledger rules,
        // money. No I/O.
        .target(
            name: "BillingCore",
            dependencies: [
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ],
            // Apple's roots, compiled in as bytes: the trust anchors need no file at run time. G3 signs
            // the App Store's JWS; Apple Inc. Root signs StoreKit 1 app receipts.
            resources: [
                .embedInCode("AppStore/Verification/AppleRootCA-G3.cer"),
                .embedInCode("AppStore/Verification/AppleIncRootCertificate.cer"),
            ],
            swiftSettings: swiftSettings
        ),
        // The ledger behind the LedgerStore protocols, implemented on SQLite with GRDB (migrations,
        // inbox with group commit, ledger façade) and, under Postgres/, on PostgreSQL with
        // postgres-nio for several replicas on one database. Nothing above it spells SQL.
        .target(
            name: "BillingStore",
            dependencies: [
                "BillingCore",
                "CZstd",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // libzstd, which compresses the bodies the inbox stores.
        .systemLibrary(
            name: "CZstd",
            pkgConfig: "libzstd",
            providers: [.apt(["libzstd-dev"])]
        ),
        // libcurl, with a thin shim over the variadic curl_easy_setopt/getinfo.
        .systemLibrary(
            name: "CCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]
        ),
        // The HTTP transport every outside API shares: libcurl off the cooperative pool, TLS always
        // verified, keep-alive, time limits; the token bucket with interactive-first queues.
        .target(
            name: "APITransport",
            dependencies: ["CCurl"],
            swiftSettings: swiftSettings
        ),
        // StripeClient over APITransport: wire rules, retries, rate limit, pagination.
        .target(
            name: "StripeAPI",
            dependencies: [
                "APITransport",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // AppStoreClient over APITransport: ES256 tokens, Apple's errors, retries, verified answers.
        .target(
            name: "AppStoreAPI",
            dependencies: [
                "APITransport",
                "BillingCore",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // Samples and test keys, for tests, local mode and fuzzing, never for the daemon's production
        // path: Stripe's example of every object (sample-objects.json, compiled in), sample events
        // and `trigger --set` fields, App Store notifications and receipts, and a stand-in of Apple's
        // signing PKI that forges JWS.
        .target(
            name: "BillingSamples",
            dependencies: [
                "BillingCore",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ],
            // Written by scripts/gen-fixtures; compiled in, so that no file need sit next to a binary.
            resources: [.embedInCode("Stripe/sample-objects.json")],
            swiftSettings: swiftSettings
        ),
        // Test support: a stateful fake of the Stripe REST API on loopback.
        .target(
            name: "StripeFake",
            dependencies: [
                "BillingCore",
                "BillingSamples",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        // The fake as a process, for scripts/bench-reconcile and trying billingd by hand.
        .executableTarget(
            name: "stripe-fake",
            dependencies: ["StripeFake", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            swiftSettings: swiftSettings
        ),
        // Test support: a stateful fake of the App Store Server API on loopback, checking billingd's
        // JWT for real and signing with a stand-in of Apple's PKI.
        .target(
            name: "AppStoreFake",
            dependencies: [
                "BillingCore",
                "BillingSamples",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        // The App Store fake as a process, for benchmarks and trying billingd by hand.
        .executableTarget(
            name: "appstore-fake",
            dependencies: ["AppStoreFake", "BillingSamples", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            swiftSettings: swiftSettings
        ),
        // Hummingbird router and the long-running services. No fake, no sample, no test key: local
        // mode's stand-ins come in through its LocalStandIns protocol, from BillingLocal.
        .target(
            name: "BillingServer",
            dependencies: [
                "BillingCore",
                "BillingStore",
                "APITransport",
                "AppStoreAPI",
                "StripeAPI",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Yams", package: "Yams"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "AsyncAlgorithms", package: "swift-async-algorithms"),
            ],
            // The service API's OpenAPI document, served at /openapi.json, and the console's
            // stylesheet, served at /console/static/console.css, from the binary itself.
            resources: [.embedInCode("OpenAPI/openapi.json"), .embedInCode("Console/console.css")],
            swiftSettings: swiftSettings
        ),
        // Local mode (`serve --local`, `trigger`, `appstore trigger`): the generated webhook secret,
        // the local App Store PKI, and the Stripe and App Store fakes wired in as BillingServer's
        // LocalStandIns. Only BillingCommands imports it.
        .target(
            name: "BillingLocal",
            dependencies: [
                "BillingCore",
                "BillingStore",
                "BillingServer",
                "BillingSamples",
                "StripeFake",
                "AppStoreFake",
                "APITransport",
                "AppStoreAPI",
                "StripeAPI",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        // ArgumentParser commands, a library so that tests can run them.
        .target(
            name: "BillingCommands",
            dependencies: [
                "BillingCore",
                "BillingSamples",
                "BillingStore",
                "BillingServer",
                "BillingLocal",
                "APITransport",
                "AppStoreAPI",
                "StripeAPI",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "billingd",
            dependencies: ["BillingCommands", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            swiftSettings: swiftSettings
        ),
        // The fuzz targets (issue 18): every parser of outside input as a function of raw bytes,
        // run by libFuzzer from Fuzz/ and, on its seeds and every input that ever crashed one,
        // by FuzzHarnessesTests. The App Store target trusts the root of the test PKI that signed its
        // seeds (its certificate only; the PKI with its key is test data in Fixtures/appstore).
        .target(
            name: "FuzzHarnesses",
            dependencies: ["BillingCore", "BillingServer", "StripeAPI"],
            resources: [.embedInCode("appstore-test-root.der")],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "FuzzHarnessesTests",
            dependencies: ["FuzzHarnesses", "BillingCore", "BillingSamples"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "BillingCoreTests",
            dependencies: [
                "BillingCore",
                // The test PKI, sample receipts and Stripe's example objects.
                "BillingSamples",
                // RSA test PKIs for receipts signed as Apple signs them.
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "BillingStoreTests",
            dependencies: [
                "BillingTestSupport", "BillingCore", "BillingSamples", "BillingStore", .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"), .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "CSV", package: "CSV.swift"),
            ],
            swiftSettings: swiftSettings
        ),
        // Test-only support shared by test targets (no product depends on it).
        .target(
            name: "BillingTestSupport",
            dependencies: [
                "BillingStore", .product(name: "PostgresNIO", package: "postgres-nio"), .product(name: "Logging", package: "swift-log"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            path: "Tests/BillingTestSupport",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "BillingServerTests",
            dependencies: [
                "BillingTestSupport",
                "BillingCore",
                "BillingSamples",
                "BillingStore",
                "BillingServer",
                "BillingLocal",
                "BillingCommands",
                "APITransport",
                "StripeAPI",
                "StripeFake",
                "AppStoreAPI",
                "AppStoreFake",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "AppStoreAPITests",
            dependencies: [
                "APITransport",
                "AppStoreAPI",
                "AppStoreFake",
                "BillingCore",
                "BillingSamples",
                "BillingStore",
                "BillingServer",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "AppStoreFakeTests",
            dependencies: [
                "AppStoreFake",
                "BillingCore",
                "BillingSamples",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "StripeAPITests",
            dependencies: [
                "APITransport",
                "StripeAPI",
                "StripeFake",
                "BillingCore",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
    ]
)
