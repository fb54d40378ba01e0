import FolioCore
import FolioTestSupport
import Foundation
import XCTest

final class LocalSourceTests: XCTestCase {
    func testConformance() async throws {
        let served = TemporaryDirectory("local-source")
        try await SourceConformance.run(servedRoot: served.path) { LocalSource(rootPath: $0) }
    }
}
