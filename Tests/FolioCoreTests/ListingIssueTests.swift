@testable import FolioCore
import XCTest

final class ListingIssueTests: XCTestCase {
    /// Pairs of names that differ only in Unicode normalisation recur every run: more than three share one line,
    /// where the first was, naming the first three; three or fewer keep a line each. Other issues keep theirs.
    func testManyNormalisationClashesShareOneLine() {
        let clashes = (1...5).map { ListingIssue(path: "caf\u{E9} \($0).txt", kind: .normalizationClash("cafe\u{301} \($0).txt")) }
        let unreadable = ListingIssue(path: "locked", kind: .unreadable("permission denied"))
        XCTAssertEqual(ListingIssue.notices([unreadable] + clashes), [
            "cannot list locked: permission denied",
            "caf\u{E9} 1.txt and cafe\u{301} 1.txt, caf\u{E9} 2.txt and cafe\u{301} 2.txt, caf\u{E9} 3.txt and cafe\u{301} 3.txt, "
                + "and 2 more pairs differ only in Unicode normalisation; all kept",
        ])
        XCTAssertEqual(ListingIssue.notices(Array(clashes.prefix(3))),
                       (1...3).map { "caf\u{E9} \($0).txt and cafe\u{301} \($0).txt differ only in Unicode normalisation; both kept" })
    }
}
