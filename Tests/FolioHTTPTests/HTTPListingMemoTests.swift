@testable import FolioHTTP
import XCTest

/// The listing memo an HTTP source leaves for the next run, as stored.
final class HTTPListingMemoTests: XCTestCase {
    func testTheMemoReadsBackWhatItWroteAndIgnoresUnknownWords() {
        let memo = HTTPListingMemo(infinityRefused: true, far: true)
        XCTAssertEqual(memo.text, "depth-1 far")
        XCTAssertEqual(HTTPListingMemo(memo.text), memo)
        XCTAssertEqual(HTTPListingMemo("far someday-word"), HTTPListingMemo(far: true))
        XCTAssertEqual(HTTPListingMemo(nil), HTTPListingMemo())
        XCTAssertEqual(HTTPListingMemo().text, "")
    }
}
