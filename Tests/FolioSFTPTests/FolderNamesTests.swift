@testable import FolioSFTP
import XCTest

/// The bound on one folder's readdir: a listing that goes round in circles, or never ends, fails that folder with
/// a line saying so; a large folder that ends is taken whole.
final class FolderNamesTests: XCTestCase {
    private let file = RemoteAttributes(mode: 0o100644, size: 1, mtime: 1_600_000_000)

    private func name(_ number: Int) -> FolderNames.Name { (Array("file \(number)".utf8), file) }

    func testAListingThatGoesRoundInCirclesFailsOnceItsFirstNameComesAgain() throws {
        var names = FolderNames(watchedFrom: 1_000)
        var failure: LibSSH2Error?
        for number in 0..<5_000 {
            do { try names.append(name(number % 1_500)) } catch {
                failure = error
                break
            }
        }
        let error = try XCTUnwrap(failure)
        XCTAssertTrue(error.isEndlessListing)
        XCTAssertEqual(EntryClassifier.reason(error), "the server listed \"file 0\" twice in it, after 1500 names: its listing goes round in circles (a fault of the disk or share behind the server); check the folder on the server")
    }

    /// Names seen twice before the watch starts are the server's business (no real folder has any); the bound is on
    /// the listing that does not end.
    func testAFolderOfUniqueNamesIsTakenWholePastTheWatch() throws {
        var names = FolderNames(watchedFrom: 1_000)
        for number in 0..<3_000 { try names.append(name(number)) }
        XCTAssertEqual(names.names.count, 3_000)
        XCTAssertEqual(names.names.last?.name, Array("file 2999".utf8))
    }

    func testAListingThatNeverEndsFailsAtTheByteLimit() throws {
        var names = FolderNames(watchedFrom: 1_000_000, byteLimit: 100_000)
        var failure: LibSSH2Error?
        for number in 0..<1_000_000 {
            do { try names.append(name(number)) } catch {
                failure = error
                break
            }
        }
        let error = try XCTUnwrap(failure)
        XCTAssertEqual(EntryClassifier.reason(error), "the server listed more than 1385 names in it and did not end (its listing is broken); check the folder on the server, or exclude it")
    }
}
