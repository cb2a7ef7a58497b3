/// Strict base64 for JWS: base64url for the three segments (RFC 7515 §2), standard base64 for
/// the `x5c` certificates (RFC 7515 §4.1.6).
///
/// Strict means: only the alphabet's characters, `=` only as correct trailing padding, no
/// whitespace, and zero bits after the last byte, so that one text decodes one way only.
package enum JWSBase64 {
    package enum Alphabet {
        /// `A–Z a–z 0–9 - _`, padding optional (JWS omits it).
        case url
        /// `A–Z a–z 0–9 + /`, padding optional.
        case standard
    }

    /// The bytes of `text`, or nil when it is not strictly base64 in `alphabet`.
    static func decode(_ text: some StringProtocol, alphabet: Alphabet) -> [UInt8]? {
        var digits = Array(text.utf8)
        // Padding: at most two `=`, only at the end, only to a multiple of four.
        var padding = 0
        while digits.last == UInt8(ascii: "=") {
            digits.removeLast()
            padding += 1
        }
        if padding > 0 && (padding > 2 || (digits.count + padding) % 4 != 0) { return nil }
        if digits.count % 4 == 1 { return nil }

        var bytes = [UInt8]()
        bytes.reserveCapacity(digits.count * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        for digit in digits {
            guard let value = sextet(digit, alphabet) else { return nil }
            accumulator = accumulator << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                bytes.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
            }
        }
        // The bits left over must be zero: "QQ" is "A", "QR" is not another spelling of it.
        if bits > 0 && accumulator & ((1 << UInt32(bits)) - 1) != 0 { return nil }
        return bytes
    }

    /// `bytes` as base64 in `alphabet`; url is unpadded (as in a compact JWS), standard is padded.
    package static func encode(_ bytes: some Sequence<UInt8>, alphabet: Alphabet) -> String {
        let table = Array(
            alphabet == .url
                ? "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8
                : "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
        var out = [UInt8]()
        var accumulator: UInt32 = 0
        var bits = 0
        for byte in bytes {
            accumulator = accumulator << 8 | UInt32(byte)
            bits += 8
            while bits >= 6 {
                bits -= 6
                out.append(table[Int(accumulator >> UInt32(bits) & 0x3f)])
            }
        }
        if bits > 0 {
            out.append(table[Int(accumulator << UInt32(6 - bits) & 0x3f)])
        }
        if alphabet == .standard {
            while out.count % 4 != 0 { out.append(UInt8(ascii: "=")) }
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func sextet(_ digit: UInt8, _ alphabet: Alphabet) -> UInt8? {
        switch digit {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): digit - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): digit - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0") + 52
        case UInt8(ascii: "-") where alphabet == .url: 62
        case UInt8(ascii: "_") where alphabet == .url: 63
        case UInt8(ascii: "+") where alphabet == .standard: 62
        case UInt8(ascii: "/") where alphabet == .standard: 63
        default: nil
        }
    }
}
