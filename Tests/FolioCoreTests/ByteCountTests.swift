import FolioCore
import XCTest

final class ByteCountTests: XCTestCase {
    /// Sizes as people read them, and none shown as 1024 of a unit: 1,048,575 B read "1024 KiB".
    func testSizesRoundIntoTheNextUnitRatherThanShow1024() {
        let cases: [(Int64, String)] = [
            (0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (1536, "1.5 KiB"), (102_400, "100 KiB"),
            (1_048_063, "1023 KiB"), (1_048_575, "1.0 MiB"), (1_048_576, "1.0 MiB"), (5 << 30, "5.0 GiB"),
        ]
        for (bytes, text) in cases { XCTAssertEqual(ByteCount.format(bytes), text, "\(bytes)") }
        XCTAssertEqual(ByteCount.rate(1_048_575), "1.0 MiB/s")
    }
}
