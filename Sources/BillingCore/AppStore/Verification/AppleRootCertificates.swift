/// Apple's root certificate authorities that sign the App Store's data, compiled into the binary.
///
/// Embedded with SwiftPM's `.embedInCode`, so the trust anchor is part of the executable: no
/// file to find or to swap at run time. Source: https://www.apple.com/certificateauthority/
public enum AppleRootCertificates {
    /// Apple Root CA - G3 (ECC P-384, valid 2014-04-30 to 2039-04-30), DER. SHA-256
    /// 63343abfb89a6a03ebb57e9b3f5fa7be7c4f5c756f3017b3a8c488c3653e9179. Signs the App Store's JWS.
    public static let g3: [UInt8] = PackageResources.AppleRootCA_G3_cer

    /// Apple Inc. Root, "Apple Root CA" (RSA 2048, valid 2006-04-25 to 2035-02-09), DER
    /// (`AppleIncRootCertificate.cer`). SHA-256
    /// b0b1730ecbc7ff4505142c49f1295e6eda6bcaed7e2c68c5be91b5a11001f024. Signs, through the
    /// Worldwide Developer Relations intermediate, the PKCS#7 of StoreKit 1 app receipts.
    public static let appleIncRoot: [UInt8] = PackageResources.AppleIncRootCertificate_cer
}
