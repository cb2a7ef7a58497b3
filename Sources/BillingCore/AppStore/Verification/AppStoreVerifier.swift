import Crypto

/// Verifies the App Store's signed data (JWS) offline, the way Apple's `SignedDataVerifier`
/// (app-store-server-library-swift) does with online checks off, and no weaker.
///
/// For every JWS, in this order (the first rule that fails names the error):
/// 0. before anything is decoded, cheap bounds on unauthenticated input: a header segment of at
///    most 16 KiB → `invalid_jws`; then, scanned without a JSON parse (``JWSHeaderShape``), an
///    `x5c` of at most three entries → `invalid_chain_length` and at most 16 header members →
///    `invalid_jws`;
/// 1. three base64url segments → `invalid_jws`; a header that is a JSON object whose `alg` is
///    ES256 → `unsupported_algorithm`; a payload that is a JSON object with a `signedDate`
///    → `invalid_payload`;
/// 2. a payload naming Xcode or LocalTesting (signed on a developer's machine, not by Apple) is
///    taken without the chain only if that environment is configured, else `wrong_environment`;
///    any other payload needs steps 3 and 4;
/// 3. the `x5c` chain verifies to a configured root at the payload's `signedDate`
///    (``AppleCertificateChain``);
/// 4. the ES256 signature (raw r‖s) over the received `header.payload` bytes verifies with the
///    leaf's key → `signature_mismatch`;
/// 5. the claims are ours: bundle id → `wrong_bundle_id`; a Production notification's
///    `appAppleId` → `wrong_app_apple_id`; the environment is configured → `wrong_environment`;
///    Production data without a configured app Apple ID → `wrong_app_apple_id`.
///
/// A notification's `data.signedTransactionInfo` and `data.signedRenewalInfo` are verified by
/// the same rules and must be from the notification's environment.
///
/// Pure: no clock (validity is judged at `signedDate`), no network (no OCSP), no files.
public struct AppStoreVerifier: Sendable {
    public struct Configuration: Sendable {
        /// The app's bundle identifier; every transaction and notification must name it.
        public var bundleID: String
        /// The app's Apple ID in the App Store; required to accept Production data, and compared
        /// with a Production notification's `appAppleId`.
        public var appAppleID: Int64?
        /// The environments whose data is accepted; Xcode and LocalTesting only if listed here.
        public var environments: Set<AppStoreEnvironment>
        /// DER root certificates that chains must lead to.
        public var rootCertificates: [[UInt8]]

        public init(
            bundleID: String, appAppleID: Int64? = nil, environments: Set<AppStoreEnvironment> = [.production, .sandbox],
            rootCertificates: [[UInt8]] = [AppleRootCertificates.g3]
        ) {
            self.bundleID = bundleID
            self.appAppleID = appAppleID
            self.environments = environments
            self.rootCertificates = rootCertificates
        }
    }

    public let configuration: Configuration
    private let chain: AppleCertificateChain

    /// Parses the roots once; a root that is not DER X.509 is `invalid_certificate`.
    public init(_ configuration: Configuration) throws(AppStoreVerificationError) {
        self.configuration = configuration
        self.chain = try AppleCertificateChain(rootCertificates: configuration.rootCertificates)
    }

    /// A signed notification (`signedPayload` of Server Notifications V2), with the
    /// signedTransactionInfo and signedRenewalInfo inside it verified too.
    public func verifyNotification(_ signedPayload: String) async throws(AppStoreVerificationError) -> VerifiedNotification {
        let (jws, header, fields) = try open(signedPayload, as: SignedDataFields.Notification.self, kind: "notification")
        // Where the app and environment are named depends on the type, as in Apple's library:
        // `data`, else `summary` (renewal extensions), else `externalPurchaseToken`.
        let bundleID: String?
        let appAppleID: Int64?
        let claimed: AppStoreEnvironment?
        if let data = fields.data {
            (bundleID, appAppleID, claimed) = (data.bundleId, data.appAppleId, data.environment.map(AppStoreEnvironment.init))
        } else if let summary = fields.summary {
            (bundleID, appAppleID, claimed) = (summary.bundleId, summary.appAppleId, summary.environment.map(AppStoreEnvironment.init))
        } else if let token = fields.externalPurchaseToken {
            let sandbox = token.externalPurchaseId?.hasPrefix("SANDBOX") == true
            (bundleID, appAppleID, claimed) = (token.bundleId, token.appAppleId, sandbox ? .sandbox : .production)
        } else {
            (bundleID, appAppleID, claimed) = (nil, nil, nil)
        }
        let signedDate = try Self.signedDate(fields.signedDate, kind: "notification")
        try await authenticate(jws, header: header, environment: claimed, signedDate: signedDate)
        try checkBundleID(bundleID)
        let environment = try checkEnvironment(claimed, appAppleID: appAppleID, carriesAppAppleID: true)

        guard let uuid = fields.notificationUUID, !uuid.isEmpty else {
            throw AppStoreVerificationError(.invalidPayload, "The notification payload has no notificationUUID.")
        }
        guard let type = fields.notificationType, !type.isEmpty else {
            throw AppStoreVerificationError(.invalidPayload, "The notification payload has no notificationType.")
        }

        var transaction: VerifiedSignedData?
        if let inner = fields.data?.signedTransactionInfo {
            let place = "the notification's data.signedTransactionInfo"
            do {
                transaction = try await verifyTransaction(inner)
            } catch {
                throw error.located(in: place)
            }
            try Self.checkSameEnvironment(transaction?.environment, as: environment, place: place)
        }
        var renewalInfo: VerifiedSignedData?
        if let inner = fields.data?.signedRenewalInfo {
            let place = "the notification's data.signedRenewalInfo"
            do {
                renewalInfo = try await verifyRenewalInfo(inner)
            } catch {
                throw error.located(in: place)
            }
            try Self.checkSameEnvironment(renewalInfo?.environment, as: environment, place: place)
        }
        return VerifiedNotification(
            payload: jws.payload, notificationUUID: uuid, notificationType: AppStoreNotificationType(rawValue: type),
            subtype: fields.subtype.map(AppStoreNotificationSubtype.init),
            environment: environment, signedDate: signedDate, transaction: transaction, renewalInfo: renewalInfo)
    }

    /// `Transaction.jwsRepresentation` / `signedTransactionInfo`.
    public func verifyTransaction(_ jws: String) async throws(AppStoreVerificationError) -> VerifiedSignedData {
        let (compact, header, fields) = try open(jws, as: SignedDataFields.SignedData.self, kind: "transaction")
        let claimed = fields.environment.map(AppStoreEnvironment.init)
        let signedDate = try Self.signedDate(fields.signedDate, kind: "transaction")
        try await authenticate(compact, header: header, environment: claimed, signedDate: signedDate)
        try checkBundleID(fields.bundleId)
        let environment = try checkEnvironment(claimed, appAppleID: nil, carriesAppAppleID: false)
        return VerifiedSignedData(payload: compact.payload, environment: environment, signedDate: signedDate)
    }

    /// `signedRenewalInfo`. Renewal info names no bundle id: only its environment is checked.
    public func verifyRenewalInfo(_ jws: String) async throws(AppStoreVerificationError) -> VerifiedSignedData {
        let (compact, header, fields) = try open(jws, as: SignedDataFields.SignedData.self, kind: "renewal info")
        let claimed = fields.environment.map(AppStoreEnvironment.init)
        let signedDate = try Self.signedDate(fields.signedDate, kind: "renewal info")
        try await authenticate(compact, header: header, environment: claimed, signedDate: signedDate)
        let environment = try checkEnvironment(claimed, appAppleID: nil, carriesAppAppleID: false)
        return VerifiedSignedData(payload: compact.payload, environment: environment, signedDate: signedDate)
    }

    // MARK: - Steps

    /// Step 1: the JWS's shape, the header's `alg`, and a payload that is a JSON object.
    private func open<Fields: Decodable>(_ text: String, as type: Fields.Type, kind: String) throws(AppStoreVerificationError)
        -> (CompactJWS, SignedDataFields.Header, Fields)
    {
        let jws = try CompactJWS(parsing: text)
        try JWSHeaderShape.check(jws.header)
        guard let header = SignedDataFields.decode(SignedDataFields.Header.self, from: jws.header) else {
            throw AppStoreVerificationError(.invalidJWS, "The JWS header is not a JSON object.")
        }
        guard let alg = header.alg else {
            throw AppStoreVerificationError(.unsupportedAlgorithm, "The JWS header has no alg; Apple signs with ES256, the only alg accepted.")
        }
        guard alg == "ES256" else {
            throw AppStoreVerificationError(
                .unsupportedAlgorithm,
                "The JWS header's alg is \(AppStoreVerificationError.excerpt(alg, limit: 16)); Apple signs with ES256, the only alg accepted.")
        }
        guard let fields = SignedDataFields.decode(type, from: jws.payload) else {
            throw AppStoreVerificationError(.invalidPayload, "The JWS payload is not a JSON object (expected a signed \(kind)).")
        }
        return (jws, header, fields)
    }

    private static func signedDate(_ value: Int64?, kind: String) throws(AppStoreVerificationError) -> Int64 {
        guard let value else {
            throw AppStoreVerificationError(
                .invalidPayload,
                "The \(kind) payload has no signedDate (Unix milliseconds); the certificates are checked at that time.")
        }
        return value
    }

    /// Steps 2–4: Apple's chain and the signature, unless the payload is from a configured local environment.
    private func authenticate(
        _ jws: CompactJWS, header: SignedDataFields.Header, environment: AppStoreEnvironment?, signedDate: Int64
    ) async throws(AppStoreVerificationError) {
        if let environment, !environment.isChainSigned {
            // Xcode and LocalTesting data is signed on the developer's machine, not by Apple; Apple's
            // library skips the chain for it too. Taking it is an explicit opt-in per environment.
            guard configuration.environments.contains(environment) else { throw environmentNotAccepted(environment) }
            return
        }
        let key = try await chain.leafKey(x5c: header.x5c, signedDate: signedDate)
        guard jws.signature.count == 64,
            let signature = try? P256.Signing.ECDSASignature(rawRepresentation: jws.signature),
            key.isValidSignature(signature, for: jws.signingInput)
        else {
            throw AppStoreVerificationError(
                .signatureMismatch,
                jws.signature.count == 64
                    ? "The ES256 signature does not match the JWS header and payload under the leaf certificate's key; "
                        + "the data was altered after Apple signed it."
                    : "The JWS signature is \(jws.signature.count) bytes, not the 64 of an ES256 signature (r‖s); "
                        + "the data was not signed by Apple.")
        }
    }

    /// Step 5: the bundle id.
    private func checkBundleID(_ bundleID: String?) throws(AppStoreVerificationError) {
        guard let bundleID else {
            throw AppStoreVerificationError(
                .wrongBundleID, "The data names no bundle id; this verifier accepts only \(Self.quote(configuration.bundleID)).")
        }
        guard bundleID == configuration.bundleID else {
            throw AppStoreVerificationError(
                .wrongBundleID,
                "The data is for bundle id \(AppStoreVerificationError.excerpt(bundleID)), not the configured "
                    + "\(Self.quote(configuration.bundleID)); check the configured bundle id, or send this app's data to its own billingd.")
        }
    }

    /// Step 5: the app Apple ID and the environment; returns the environment, now trusted.
    private func checkEnvironment(_ environment: AppStoreEnvironment?, appAppleID: Int64?, carriesAppAppleID: Bool)
        throws(AppStoreVerificationError) -> AppStoreEnvironment
    {
        guard let environment else {
            throw AppStoreVerificationError(.wrongEnvironment, "The data names no environment (Production, Sandbox, …).")
        }
        if environment == .production, carriesAppAppleID, let expected = configuration.appAppleID, appAppleID != expected {
            throw AppStoreVerificationError(
                .wrongAppAppleID,
                "The Production notification is for app Apple ID \(appAppleID.map(String.init) ?? "(none)"), not the "
                    + "configured \(expected); check APPSTORE_APP_APPLE_ID.")
        }
        guard configuration.environments.contains(environment) else { throw environmentNotAccepted(environment) }
        if environment == .production && configuration.appAppleID == nil {
            throw AppStoreVerificationError(
                .wrongAppAppleID,
                "Production data is accepted only with the app's Apple ID configured, as Apple's library requires: "
                    + "set APPSTORE_APP_APPLE_ID (App Store Connect → App Information → Apple ID).")
        }
        return environment
    }

    private func environmentNotAccepted(_ environment: AppStoreEnvironment) -> AppStoreVerificationError {
        let accepted = configuration.environments.map(\.rawValue).sorted().joined(separator: ", ")
        return AppStoreVerificationError(
            .wrongEnvironment,
            "The data is from the \(AppStoreVerificationError.excerpt(environment.rawValue, limit: 24)) environment, "
                + "which is not accepted here (accepted: \(accepted.isEmpty ? "none" : accepted)); "
                + "add it to the configured environments to accept it.")
    }

    private static func checkSameEnvironment(_ inner: AppStoreEnvironment?, as outer: AppStoreEnvironment, place: String)
        throws(AppStoreVerificationError)
    {
        guard let inner, inner != outer else { return }
        throw AppStoreVerificationError(
            .wrongEnvironment,
            "In \(place): the data is from \(AppStoreVerificationError.excerpt(inner.rawValue, limit: 24)) but the "
                + "notification is from \(outer.rawValue); the two must agree.")
    }

    /// Configured text, quoted as written (it is ours, not the input's).
    private static func quote(_ text: String) -> String { "\"\(text)\"" }
}
