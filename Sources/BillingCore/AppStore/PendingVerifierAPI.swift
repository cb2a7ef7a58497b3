// Temporary: the verifier's API while it is written on the appstore-verifier branch; this file
// is deleted when that branch is merged.
import Foundation

public struct AppStoreEnvironment: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let production = AppStoreEnvironment(rawValue: "Production")
    public static let sandbox = AppStoreEnvironment(rawValue: "Sandbox")
    public static let xcode = AppStoreEnvironment(rawValue: "Xcode")
    public static let localTesting = AppStoreEnvironment(rawValue: "LocalTesting")
    public var isLive: Bool { self == .production }
    public var isChainSigned: Bool { self == .production || self == .sandbox }
    public var description: String { rawValue }
}

public struct AppStoreVerificationError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Code: String, Sendable { case invalidJWS = "invalid_jws", invalidPayload = "invalid_payload" }
    public let code: Code
    public let message: String
    public var description: String { message }
}

public enum AppStoreJWS {
    public static func payload(of jws: String) throws(AppStoreVerificationError) -> [UInt8] {
        let parts = jws.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw AppStoreVerificationError(code: .invalidJWS, message: "not three segments") }
        var text = parts[1].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while text.count % 4 != 0 { text += "=" }
        guard let data = Data(base64Encoded: text) else { throw AppStoreVerificationError(code: .invalidJWS, message: "bad base64") }
        return Array(data)
    }
}
public struct VerifiedSignedData: Sendable, Equatable {
    public let payload: [UInt8]
    public let environment: AppStoreEnvironment
    public let signedDate: Int64
}
public struct VerifiedNotification: Sendable, Equatable {
    public let payload: [UInt8]
    public let notificationUUID: String
    public let notificationType: String
    public let subtype: String?
    public let environment: AppStoreEnvironment
    public let signedDate: Int64
    public let transaction: VerifiedSignedData?
    public let renewalInfo: VerifiedSignedData?
}
public struct AppStoreVerifier: Sendable {
    public func verifyNotification(_ signedPayload: String) throws(AppStoreVerificationError) -> VerifiedNotification { fatalError() }
    public func verifyTransaction(_ jws: String) throws(AppStoreVerificationError) -> VerifiedSignedData { fatalError() }
}
public struct AppStoreTestPKI: Sendable {
    public init() throws {}
    public init(serialized: String) throws {}
    public func serialized() -> String { "" }
    public var rootDER: [UInt8] { [] }
    public func sign(payload: [UInt8]) -> String { "" }
}
public enum AppleRootCertificates { public static let g3: [UInt8] = [] }
extension AppStoreVerifier {
    public struct Configuration: Sendable {
        public init(bundleID: String, appAppleID: Int64? = nil, environments: Set<AppStoreEnvironment> = [.production, .sandbox], rootCertificates: [[UInt8]] = [AppleRootCertificates.g3]) {}
    }
    public init(_ configuration: Configuration) throws(AppStoreVerificationError) {}
}
