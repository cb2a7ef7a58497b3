@testable import BillingCore
import Foundation
import Testing

@Suite("App Store receipt dates")
struct AppStoreReceiptDateTests {
    @Test("RFC 3339 dates read as Unix milliseconds, with Xcode's offsets without a colon", arguments: [
        ("2025-04-30T02:17:37Z", 1_745_979_457_000),
        ("2025-04-30t02:17:37z", 1_745_979_457_000),
        ("2020-09-01T16:58:42+0300", 1_598_968_722_000),
        ("2020-09-01T16:58:42+03:00", 1_598_968_722_000),
        ("2020-09-01T10:28:42-03:30", 1_598_968_722_000),
        ("2024-02-29T23:59:59.123+05:30", 1_709_231_399_123),
        ("1970-01-01T00:00:00.5Z", 500),
        ("1970-01-01T00:00:00.123456789Z", 123),
        ("1969-12-31T23:59:59Z", -1000),
        ("4001-01-01T00:00:00Z", 64_092_211_200_000),
    ] as [(String, Int64)])
    func accepted(text: String, milliseconds: Int64) {
        #expect(ReceiptDate.milliseconds(text) == milliseconds)
    }

    @Test("What is not an RFC 3339 date-time is refused", arguments: [
        "", "2025-04-30", "2025-04-30T02:17:37", "2025-04-30 02:17:37Z", "2025-02-29T00:00:00Z", "2025-13-01T00:00:00Z",
        "2025-04-31T00:00:00Z", "2025-04-30T24:00:00Z", "2025-04-30T02:60:00Z", "2025-04-30T02:17:37.Z",
        "2025-04-30T02:17:37.1234567890Z", "2025-04-30T02:17:37+3", "2025-04-30T02:17:37+24:00", "2025-04-30T02:17:37Z ",
        "+2025-04-30T02:17:37Z", "2025-4-30T02:17:37Z", "next Tuesday",
    ])
    func refused(text: String) {
        #expect(ReceiptDate.milliseconds(text) == nil)
    }

    @Test("Written dates agree with Foundation's ISO 8601 and read back to the second")
    func roundTrip() {
        let formatter = ISO8601DateFormatter()
        formatter.timeZone = TimeZone(identifier: "UTC")
        for milliseconds: Int64 in [0, 999, -1, -86_400_001, 951_782_400_000, 1_745_979_457_123, 4_102_444_799_999, 253_402_300_799_000] {
            let text = ReceiptDate.text(milliseconds)
            let seconds = milliseconds >= 0 ? milliseconds / 1000 : (milliseconds - 999) / 1000
            #expect(text == formatter.string(from: Date(timeIntervalSince1970: TimeInterval(seconds))))
            #expect(ReceiptDate.milliseconds(text) == seconds * 1000)
        }
    }
}
