import FolioCore
import FolioTestSupport
import XCTest

/// Secrets read from files: what is kept of the file's bytes.
final class SecretFileTests: XCTestCase {
    /// Trailing line endings go, Unix or Windows or several, and nothing else does: spaces, a `\r` inside, and
    /// non-ASCII bytes are part of the secret.
    func testTrailingLineEndsAreDroppedWhateverTheirStyle() throws {
        let folder = TemporaryDirectory("secret")
        let cases: [(String, String)] = [
            ("pa55\n", "pa55"), ("pa55\r\n", "pa55"), ("pa55\r\n\r\n", "pa55"), ("pa55\r", "pa55"), ("pa55\n\r\n", "pa55"),
            ("pä55 \r\n", "pä55 "), ("pa\r\n55\r\n", "pa\r\n55"), ("pa55", "pa55"),
        ]
        for (index, (content, secret)) in cases.enumerated() {
            FixtureTree.write(folder.path, "s\(index)", content)
            XCTAssertEqual(Array(try SecretFile.read(folder.path("s\(index)"), what: "password-file").utf8), Array(secret.utf8), content.debugDescription)
        }
    }

    /// A secret handed over in a pipe (`--password-file <(pass show nas)`) is read as a file's is.
    func testASecretInAPipeIsRead() throws {
        let pipe = FixtureTree.pipe(holding: "s3cret\n")
        defer { close(pipe.fd) }
        XCTAssertEqual(try SecretFile.read(pipe.path, what: "password-file"), "s3cret")
        // Read again (an SFTP run logs in once per connection), the drained pipe still gives the secret.
        XCTAssertEqual(try SecretFile.read(pipe.path, what: "password-file"), "s3cret")
    }

    /// A file with nothing in it but line ends is refused, naming the file: sent as is, it was an empty password or
    /// token (`Authorization: Bearer ` with nothing after it), and the run went on as if all were set up.
    func testAnEmptySecretFileIsRefused() throws {
        let folder = TemporaryDirectory("secret")
        for content in ["", "\n", "\r\n"] {
            FixtureTree.write(folder.path, "empty", content)
            XCTAssertThrowsError(try SecretFile.read(folder.path("empty"), what: "token-file"), content.debugDescription) { error in
                XCTAssertEqual((error as? SourceError)?.code, .authentication)
                XCTAssertEqual((error as? SourceError)?.message, "token-file \(folder.path("empty")) is empty; write the secret in it")
            }
        }
    }
}
