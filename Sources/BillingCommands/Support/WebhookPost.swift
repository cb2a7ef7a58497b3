import ArgumentParser
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// How `trigger` and `appstore trigger` deliver the sample they signed: print the request, or
/// post it to a running billingd and print the answer (exit 1 on a non-2xx answer).
struct WebhookPost {
    let target: String
    let headers: [(name: String, value: String)]
    let body: [UInt8]

    /// Prints the request as it would be sent.
    func print() {
        Swift.print("POST \(target)")
        for header in headers { Swift.print("\(header.name): \(header.value)") }
        Swift.print("Content-Type: application/json\n")
        Swift.print(String(decoding: body, as: UTF8.self))
    }

    /// Posts it; prints `label → HTTP status body`.
    /// - Parameter example: a URL of the right shape, for the error on a bad `--url`.
    func send(label: String, example: String) async throws {
        guard let endpoint = URL(string: target), ["http", "https"].contains(endpoint.scheme ?? "") else {
            throw ValidationError("--url must be an http(s) URL, e.g. \(example).")
        }
        var request = URLRequest(url: endpoint)
        request.httpMethod = "POST"
        request.setValue("application/json; charset=utf-8", forHTTPHeaderField: "Content-Type")
        request.setValue("billingd-trigger/\(BillingdVersion.current)", forHTTPHeaderField: "User-Agent")
        for header in headers { request.setValue(header.value, forHTTPHeaderField: header.name) }
        request.httpBody = Data(body)
        request.timeoutInterval = 30
        let (data, response): (Data, URLResponse)
        do {
            (data, response) = try await URLSession.shared.data(for: request)
        } catch {
            throw CommandFailure(.unavailable, "Could not reach \(target): \(error.localizedDescription). Is `billingd serve` running there?")
        }
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        Swift.print("\(label) → HTTP \(status) \(String(decoding: data, as: UTF8.self))")
        if !(200..<300).contains(status) { throw ExitCode(1) }
    }
}
