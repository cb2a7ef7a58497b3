import Crypto
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Reads the In-App Purchase key (`SubscriptionKey_XXXXXXXXXX.p8`, a PKCS#8 PEM) from a file,
/// refusing a file others can read: whoever reads it can act as the app towards Apple.
public enum AppStoreSigningKey {
    /// Why the key could not be used. Messages name the file, never its contents.
    public struct LoadError: Error, Sendable, Equatable, CustomStringConvertible {
        public let message: String
        public var description: String { message }
    }

    public static func load(path: String) throws(LoadError) -> P256.Signing.PrivateKey {
        var info = stat()
        guard stat(path, &info) == 0 else {
            throw LoadError(message: "cannot read the App Store key \(path): \(String(cString: strerror(errno))). Download it from App Store Connect → Users and Access → Integrations → In-App Purchase.")
        }
        let mode = info.st_mode & 0o777
        if mode & 0o077 != 0 {
            throw LoadError(message: "the App Store key \(path) is readable by others (mode \(String(mode, radix: 8))); make it private with: chmod 600 \(path)")
        }
        guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8) else {
            throw LoadError(message: "cannot read the App Store key \(path); check that billingd's user owns it.")
        }
        return try parse(pem: text, origin: path)
    }

    /// A PKCS#8 PEM P-256 key, as App Store Connect hands it out.
    public static func parse(pem: String, origin: String = "the key") throws(LoadError) -> P256.Signing.PrivateKey {
        do {
            return try P256.Signing.PrivateKey(pemRepresentation: pem)
        } catch {
            throw LoadError(message: "\(origin) is not an App Store In-App Purchase key (a PEM \"PRIVATE KEY\" on the P-256 curve, the .p8 file App Store Connect gives).")
        }
    }
}
