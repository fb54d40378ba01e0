@testable import FolioHTTP
import XCTest

/// The listing memo an HTTP source leaves for the next run, as stored.
final class HTTPListingMemoTests: XCTestCase {
    func testTheMemoReadsBackWhatItWroteAndIgnoresUnknownWords() {
        let memo = HTTPListingMemo(infinityRefusedOn: 20_400, far: true)
        XCTAssertEqual(memo.text, "depth-1=20400 far")
        XCTAssertEqual(HTTPListingMemo(plainOn: 20_401).text, "index=20401")
        XCTAssertEqual(HTTPListingMemo("index=20401 far"), HTTPListingMemo(plainOn: 20_401, far: true))
        XCTAssertEqual(HTTPListingMemo(memo.text), memo)
        XCTAssertEqual(HTTPListingMemo("far someday-word depth-1=x"), HTTPListingMemo(far: true))
        XCTAssertEqual(HTTPListingMemo(nil), HTTPListingMemo())
        XCTAssertEqual(HTTPListingMemo().text, "")
    }

    /// A refusal of `Depth: infinity`, or a plain server, holds for a week; then the server is asked again.
    func testAServersAnswerHoldsForAWeek() {
        let memo = HTTPListingMemo(infinityRefusedOn: 20_400)
        XCTAssertTrue(memo.refusesInfinity(today: 20_400))
        XCTAssertTrue(memo.refusesInfinity(today: 20_406))
        XCTAssertFalse(memo.refusesInfinity(today: 20_407))
        XCTAssertFalse(memo.refusesInfinity(today: 20_399), "a clock set back asks again")
        XCTAssertFalse(HTTPListingMemo(far: true).refusesInfinity(today: 20_400))
        XCTAssertTrue(HTTPListingMemo(plainOn: 20_400).isPlain(today: 20_406))
        XCTAssertFalse(HTTPListingMemo(plainOn: 20_400).isPlain(today: 20_407))
        XCTAssertFalse(memo.isPlain(today: 20_400))
    }
}
