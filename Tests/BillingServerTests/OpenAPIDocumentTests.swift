import BillingCore
import BillingServer
import BillingStore
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing

/// The OpenAPI document at `GET /openapi.json` is the one kept in the repository, describes
/// exactly the routes billingd serves, and holds together (every reference resolves). What the
/// endpoints answer is checked against it by schemathesis in scripts/test.
@Suite struct OpenAPIDocumentTests {
    /// The document as kept in the repository.
    static let file = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Sources/BillingServer/OpenAPI/openapi.json")

    static func document() throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: file)) as? [String: Any])
    }

    /// Every route on: the service API (a token), the App Store (a verifier), a metrics token.
    static func fullDependencies(_ ledger: TemporaryLedger) throws -> BillingServerDependencies {
        var dependencies = makeDependencies(ledger)
        dependencies.apiTokens = [userAPIToken]
        dependencies.appStoreVerifier = try AppStoreTestbed().verifier
        dependencies.metricsToken = "metrics-token"
        dependencies.consoleTokens = [ConsoleToken(label: "finance", token: "console-token-0123456789")]
        return dependencies
    }

    @Test func servedWithoutATokenAsKeptInTheRepository() async throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        let kept = try Data(contentsOf: Self.file)
        try await makeApplication(try Self.fullDependencies(ledger)).test(.router) { client in
            let response = try await client.execute(uri: "/openapi.json", method: .get)
            #expect(response.status == .ok)
            #expect(response.headers[.contentType] == "application/json")
            #expect(Data(response.body.readableBytesView) == kept)
        }
        let document = try Self.document()
        #expect(document["openapi"] as? String == "3.1.0")
    }

    @Test func describesExactlyTheRoutesServed() throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        let router = BillingApplication.router(try Self.fullDependencies(ledger))
        // Hummingbird describes a capture as OpenAPI writes it, `{name}`.
        // The console's pages (docs/console.md) are HTML for a browser, not the JSON API the
        // document describes; every other route is in it.
        let served = Set(router.routes.map { "\($0.method.rawValue) \($0.path.description)" }.filter { !$0.contains(" /console") })
        #expect(router.routes.contains { $0.path.description == "/console/overview" }, "the console is served in this set-up")
        let paths = try #require(try Self.document()["paths"] as? [String: [String: Any]])
        let methods: Set<String> = ["get", "head", "post", "put", "patch", "delete"]
        let documented = Set(paths.flatMap { path, operations in
            operations.keys.filter(methods.contains).map { "\($0.uppercased()) \(path)" }
        })
        #expect(served.count > 20)
        #expect(served.subtracting(documented).sorted() == [], "served but not documented")
        #expect(documented.subtracting(served).sorted() == [], "documented but not served")
    }

    @Test func everyOperationDocumentsItsErrors() throws {
        let paths = try #require(try Self.document()["paths"] as? [String: [String: Any]])
        for (path, operations) in paths {
            for (method, value) in operations {
                let operation = try #require(value as? [String: Any])
                let responses = try #require(operation["responses"] as? [String: Any])
                // The HTTP parser's malformed_request can answer any request.
                #expect(responses["400"] != nil, "\(method) \(path) leaves out 400")
                if path.hasPrefix("/v1/metrics/") {
                    // The console's token, never the app's: 403 for the app's.
                    #expect(responses["401"] != nil && responses["403"] != nil, "\(method) \(path) leaves out 401 or 403")
                    let security = operation["security"] as? [[String: [String]]]
                    #expect(security == [["console": []]], "\(method) \(path) must take the console token")
                } else if path.hasPrefix("/v1/users/{user}/grants") || path == "/v1/users/{user}/timeline" {
                    // Promotional grants and the customer timeline: the app's token or an operator's.
                    #expect(responses["401"] != nil, "\(method) \(path) leaves out 401")
                    let security = operation["security"] as? [[String: [String]]]
                    #expect(security == [["bearer": []], ["console": []]], "\(method) \(path) must take either token")
                } else if path.hasPrefix("/v1/") {
                    #expect(responses["401"] != nil, "\(method) \(path) leaves out 401")
                    #expect(operation["security"] == nil, "\(method) \(path) must keep the bearer token")
                } else {
                    #expect((operation["security"] as? [Any])?.isEmpty == true, "\(method) \(path) needs no token")
                }
                if operation["requestBody"] != nil, path.hasPrefix("/v1/") {
                    #expect(responses["415"] != nil, "\(method) \(path) takes a body and leaves out 415")
                }
            }
        }
    }

    @Test func everyReferenceResolves() throws {
        let document = try Self.document()
        var references: [String] = []
        func collect(_ value: Any) {
            if let object = value as? [String: Any] {
                if let reference = object["$ref"] as? String { references.append(reference) }
                object.values.forEach(collect)
            } else if let array = value as? [Any] {
                array.forEach(collect)
            }
        }
        collect(document)
        #expect(references.count > 50)
        for reference in Set(references) {
            #expect(reference.hasPrefix("#/"), "\(reference) is not local")
            var node: Any? = document
            for part in reference.dropFirst(2).split(separator: "/") {
                node = (node as? [String: Any])?[String(part)]
            }
            #expect(node != nil, "\(reference) resolves to nothing")
        }
    }
}
