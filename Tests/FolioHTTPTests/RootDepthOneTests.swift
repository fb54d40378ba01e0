@testable import FolioHTTP
import Foundation
import XCTest

/// The root's Depth: 1 request sent alongside Depth: infinity: run once, by whichever worker gets to it first.
final class RootDepthOneTests: XCTestCase {
    private struct Refused: Error {}

    private func response(_ href: String) -> MultistatusParser.Response {
        MultistatusParser.Response(href: href, isCollection: true, hasProperties: true)
    }

    func testASpareWorkersAnswerIsTakenWithoutAskingAgain() throws {
        let request = RootDepthOne()
        request.runIfWaiting { [response("/a/")] }
        let answer = try request.result { XCTFail("asked twice"); return [] }
        XCTAssertEqual(answer.map(\.href), ["/a/"])
    }

    func testTheRootsWorkerAsksItselfWhenNoWorkerStartedIt() throws {
        let request = RootDepthOne()
        XCTAssertEqual(try request.result { [response("/b/")] }.map(\.href), ["/b/"])
        request.runIfWaiting { XCTFail("the job, picked up later, asked again"); return [] }
    }

    func testTheRootsWorkerWaitsForARequestInFlightAndGetsItsError() {
        let request = RootDepthOne()
        let started = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            request.runIfWaiting {
                started.signal()
                Thread.sleep(forTimeInterval: 0.2)
                throw Refused()
            }
        }
        started.wait()
        XCTAssertThrowsError(try request.result { XCTFail("asked while in flight"); return [] }) { XCTAssertTrue($0 is Refused) }
    }

    func testADroppedRequestIsNeverSent() {
        let request = RootDepthOne()
        request.drop()
        request.runIfWaiting { XCTFail("sent after infinity answered"); return [] }
    }
}
