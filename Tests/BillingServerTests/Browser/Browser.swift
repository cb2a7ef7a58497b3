import BillingTestSupport
import Foundation
import NIOCore
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Headless Chromium driven through chromedriver over the W3C WebDriver protocol (plain HTTP and
/// JSON to a loopback port): just what the console's browser tests need — navigate, find
/// elements, click, type, read text, run a script, take screenshots, read the browser's log.
///
/// Every call to chromedriver has a deadline, and the page-load and script timeouts are set, so
/// a stuck browser fails a test instead of hanging it. ``with(_:)`` always ends the session and
/// stops chromedriver and Chromium, whatever the test did.
final class Browser: Sendable {
    struct Failure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    /// A located element, by its WebDriver reference.
    struct Element: Sendable {
        let id: String
    }

    /// One line of the browser's console log.
    struct LogEntry: Sendable, CustomStringConvertible {
        let level: String
        let source: String
        let message: String
        var description: String { "\(level) \(source): \(message)" }
    }

    static let elementKey = "element-6066-11e4-a52e-4f735466cecf"
    static let missing =
        "chromium and chromedriver are not on PATH: install Debian's chromium and chromium-driver (scripts/test does)"

    let driver: ChildProcess
    let base: String
    let session: String
    /// Chromium's own process, which chromedriver started (`goog:processID`).
    let browserPID: pid_t?
    let directory: URL

    private init(driver: ChildProcess, base: String, session: String, browserPID: pid_t?, directory: URL) {
        self.driver = driver
        self.base = base
        self.session = session
        self.browserPID = browserPID
        self.directory = directory
    }

    /// An executable named `name` on PATH.
    static func executable(_ name: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        return path.split(separator: ":").map { "\($0)/\(name)" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    static var isInstalled: Bool { executable("chromedriver") != nil && executable("chromium") != nil }

    /// Starts chromedriver and a headless Chromium session, runs `body`, and always ends both.
    static func with<Result>(_ body: (Browser) async throws -> Result) async throws -> Result {
        let browser = try await start()
        do {
            let result = try await body(browser)
            await browser.close()
            return result
        } catch {
            await browser.close()
            throw error
        }
    }

    static func start() async throws -> Browser {
        guard let chromedriver = executable("chromedriver"), let chromium = executable("chromium") else { throw Failure(missing) }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("billingd-browser-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var problems: [String] = []
        // chromedriver's --port=0 does not say which port it took: take a free one, and try
        // another should something else take it first.
        for _ in 0..<5 {
            let port = try freeLoopbackPort()
            let driver = try ChildProcess.start(
                chromedriver, ["--port=\(port)", "--allowed-ips=127.0.0.1"], environment: ProcessInfo.processInfo.environment,
                standardOutput: directory.appendingPathComponent("chromedriver.out").path,
                standardError: directory.appendingPathComponent("chromedriver.err").path)
            let base = "http://127.0.0.1:\(port)"
            guard await waitUntilReady(base, driver: driver) else {
                driver.signal(SIGKILL)
                await driver.wait()
                problems.append("chromedriver on port \(port) did not start: \(log(directory))")
                continue
            }
            do {
                let capabilities: [String: Any] = [
                    "browserName": "chrome",
                    "pageLoadStrategy": "normal",
                    "timeouts": ["pageLoad": 30_000, "script": 10_000, "implicit": 0],
                    "goog:loggingPrefs": ["browser": "ALL"],
                    "goog:chromeOptions": [
                        "binary": chromium,
                        "args": [
                            // As root, Chromium runs only without its sandbox.
                            "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                            "--disable-extensions", "--disable-background-networking", "--window-size=1280,900",
                            "--user-data-dir=\(directory.appendingPathComponent("profile").path)",
                        ],
                    ],
                ]
                let value = try await call(base, "POST", "/session", ["capabilities": ["alwaysMatch": capabilities]], timeout: .seconds(90))
                guard let object = value as? [String: Any], let session = object["sessionId"] as? String else {
                    throw Failure("chromedriver answered POST /session without a session id: \(String(describing: value))")
                }
                let pid = ((object["capabilities"] as? [String: Any])?["goog:processID"] as? Int).map { pid_t($0) }
                return Browser(driver: driver, base: base, session: session, browserPID: pid, directory: directory)
            } catch {
                driver.signal(SIGKILL)
                await driver.wait()
                try? FileManager.default.removeItem(at: directory)
                throw Failure("no Chromium session: \(error); chromedriver said: \(log(directory))")
            }
        }
        try? FileManager.default.removeItem(at: directory)
        throw Failure(problems.joined(separator: "; "))
    }

    /// Ends the session (which quits Chromium), stops chromedriver, and kills Chromium if the
    /// session could not be ended.
    func close() async {
        let ended = (try? await Self.call(base, "DELETE", "/session/\(session)", nil, timeout: .seconds(15))) != nil
        driver.signal(SIGTERM)
        for _ in 0..<50 where driver.isRunning { try? await Task.sleep(for: .milliseconds(100)) }
        if driver.isRunning { driver.signal(SIGKILL) }
        await driver.wait()
        if !ended, let browserPID, kill(browserPID, 0) == 0 { kill(browserPID, SIGKILL) }
        try? FileManager.default.removeItem(at: directory)
    }

    // MARK: Commands

    func go(_ url: String) async throws {
        try await command("POST", "/url", ["url": url])
    }

    func currentURL() async throws -> String {
        try await command("GET", "/url") as? String ?? ""
    }

    func title() async throws -> String {
        try await command("GET", "/title") as? String ?? ""
    }

    func find(_ css: String) async throws -> Element {
        let value = try await command("POST", "/element", ["using": "css selector", "value": css])
        guard let id = (value as? [String: Any])?[Self.elementKey] as? String else { throw Failure("no element \(css)") }
        return Element(id: id)
    }

    func findAll(_ css: String) async throws -> [Element] {
        let value = try await command("POST", "/elements", ["using": "css selector", "value": css])
        return (value as? [[String: Any]] ?? []).compactMap { ($0[Self.elementKey] as? String).map(Element.init) }
    }

    func click(_ element: Element) async throws {
        try await command("POST", "/element/\(element.id)/click", [:])
    }

    func click(_ css: String) async throws {
        try await click(try await find(css))
    }

    func type(_ text: String, into css: String) async throws {
        let element = try await find(css)
        try await command("POST", "/element/\(element.id)/clear", [:])
        try await command("POST", "/element/\(element.id)/value", ["text": text])
    }

    /// Chooses the `<option>` with `value` in the `<select>` of `css`.
    func select(_ value: String, in css: String) async throws {
        try await click("\(css) option[value=\"\(value)\"]")
    }

    /// The rendered text of the element of `css`.
    func text(_ css: String) async throws -> String {
        try await text(try await find(css))
    }

    func text(_ element: Element) async throws -> String {
        try await command("GET", "/element/\(element.id)/text") as? String ?? ""
    }

    /// Runs `script` in the page (WebDriver's scripts are not the page's: the CSP does not apply).
    @discardableResult
    func execute(_ script: String, _ arguments: [Any] = []) async throws -> Any? {
        try await command("POST", "/execute/sync", ["script": script, "args": arguments])
    }

    /// The page as PNG, the whole page from its top: the window is made as tall as the page at
    /// this width first.
    func screenshot(width: Int) async throws -> Data {
        try await resize(width: width, height: 900)
        let sizes = try await execute(
            "window.scrollTo(0, 0); return [Math.ceil(document.documentElement.scrollHeight), window.outerHeight - window.innerHeight];") as? [Int]
        let height = (sizes?.first ?? 900) + (sizes?.last ?? 0)
        try await resize(width: width, height: min(max(height, 600), 8_000))
        let value = try await command("GET", "/screenshot")
        guard let base64 = value as? String, let png = Data(base64Encoded: base64) else { throw Failure("the screenshot is not base64") }
        return png
    }

    func resize(width: Int, height: Int) async throws {
        try await command("POST", "/window/rect", ["width": width, "height": height])
    }

    /// The browser log since the last call (reading it empties it).
    func log() async throws -> [LogEntry] {
        let value = try await command("POST", "/se/log", ["type": "browser"])
        return (value as? [[String: Any]] ?? []).map { entry in
            LogEntry(level: entry["level"] as? String ?? "", source: entry["source"] as? String ?? "", message: entry["message"] as? String ?? "")
        }
    }

    /// The value of a cookie the page has, HttpOnly ones too; nil when it has none of that name.
    func cookie(_ name: String) async throws -> String? {
        let cookies = try await command("GET", "/cookie") as? [[String: Any]] ?? []
        return cookies.first { $0["name"] as? String == name }?["value"] as? String
    }

    /// Waits until `condition` holds, polling, for at most `seconds`. A condition that throws
    /// has not held yet: while a page is replaced, an element found on the old one is stale.
    func wait(_ what: String, seconds: Int = 15, until condition: () async throws -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(seconds)
        var lastError: (any Error)?
        while ContinuousClock.now < deadline {
            do {
                if try await condition() { return }
                lastError = nil
            } catch {
                lastError = error
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw Failure("waited \(seconds) s for \(what); the page is \(try await currentURL())\(lastError.map { "; last: \($0)" } ?? "")")
    }

    @discardableResult
    private func command(_ method: String, _ path: String, _ body: [String: Any]? = nil) async throws -> Any? {
        try await Self.call(base, method, "/session/\(session)\(path)", body, timeout: .seconds(45))
    }

    // MARK: The protocol

    /// One WebDriver call: JSON in, the answer's `value` out; a WebDriver error thrown as a failure.
    private static func call(_ base: String, _ method: String, _ path: String, _ body: [String: Any]?, timeout: TimeAmount) async throws -> Any? {
        let bytes = try body.map { Array(try JSONSerialization.data(withJSONObject: $0)) }
        let (status, data) = try await HTTP.request(
            base + path, method: method, headers: ["Content-Type": "application/json; charset=utf-8", "Connection": "close"], body: bytes,
            timeout: timeout)
        let answer = (try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])) as? [String: Any]
        guard (200..<300).contains(status) else {
            let error = answer?["value"] as? [String: Any]
            throw Failure(
                "WebDriver \(method) \(path): \(status) \(error?["error"] as? String ?? "") \((error?["message"] as? String ?? String(decoding: data.prefix(500), as: UTF8.self)).prefix(500))")
        }
        guard let answer else { throw Failure("WebDriver \(method) \(path): not JSON: \(String(decoding: data.prefix(300), as: UTF8.self))") }
        return answer["value"] is NSNull ? nil : answer["value"]
    }

    private static func waitUntilReady(_ base: String, driver: ChildProcess) async -> Bool {
        for _ in 0..<100 {
            guard driver.isRunning else { return false }
            if let value = try? await call(base, "GET", "/status", nil, timeout: .seconds(2)), (value as? [String: Any])?["ready"] as? Bool == true {
                return true
            }
            try? await Task.sleep(for: .milliseconds(100))
        }
        return false
    }

    private static func log(_ directory: URL) -> String {
        let text = ["chromedriver.err", "chromedriver.out"].compactMap { try? String(contentsOf: directory.appendingPathComponent($0), encoding: .utf8) }
        return String(text.joined(separator: " ").suffix(1_000))
    }
}

/// A TCP port nothing listens on now, on the loopback interface.
func freeLoopbackPort() throws -> Int {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard descriptor >= 0 else { throw Browser.Failure("socket: \(String(cString: strerror(errno)))") }
    defer { close(descriptor) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = 0
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
            bind(descriptor, socketAddress, length) == 0 && getsockname(descriptor, socketAddress, &length) == 0
        }
    }
    guard bound else { throw Browser.Failure("bind: \(String(cString: strerror(errno)))") }
    return Int(UInt16(bigEndian: address.sin_port))
}

extension Trait where Self == ConditionTrait {
    /// For tests that drive Chromium: skipped, with the reason, where chromium and chromedriver
    /// are not installed; under CI (`CI=true`) they always run, so that a missing browser fails
    /// them instead of skipping them silently (scripts/test installs both).
    static var needsChromium: Self {
        .enabled(if: Browser.isInstalled || ProcessInfo.processInfo.environment["CI"] == "true", Comment(rawValue: Browser.missing))
    }
}
