/// Text billingd stores as it came (ids, types, accounts) must hold no control character: GRDB
/// binds a string to SQLite as C text, which ends at the first NUL, so `evt_nul\u{0}x` would be
/// stored as `evt_nul` and a later `evt_nul` answered as its duplicate. No id of Stripe's or
/// Apple's holds one, so such text is refused, never cleaned.
public enum StoredText {
    /// Whether `text` holds a C0 or C1 control character or DEL (U+0000–U+001F, U+007F–U+009F).
    public static func hasControlCharacter(_ text: some StringProtocol) -> Bool {
        text.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) }
    }

    /// The first control character of `text` as `U+XXXX`, for messages.
    public static func firstControlCharacter(_ text: some StringProtocol) -> String? {
        guard let scalar = text.unicodeScalars.first(where: { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) }) else { return nil }
        let hex = String(scalar.value, radix: 16, uppercase: true)
        return "U+" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
    }
}
