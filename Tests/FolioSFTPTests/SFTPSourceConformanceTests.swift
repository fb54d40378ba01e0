import FolioCore
@testable import FolioSFTP
import FolioTestSupport
import Foundation
import XCTest

/// The conformance suite shared with the local source, over each listing path and a server without exec.
final class SFTPSourceConformanceTests: SFTPTestCase {
    func testConformanceWithReaddirListing() async throws {
        let server = try SSHServer()
        let served = TemporaryDirectory("sftp-served")
        try await SourceConformance.run(servedRoot: served.path, options: .init(precision: .second)) {
            try self.source(server, $0, method: .readdirOnly)
        }
    }

    func testConformanceWithReaddirOverLibssh2SFTP() async throws {
        let server = try SSHServer()
        let served = TemporaryDirectory("sftp-served")
        try await SourceConformance.run(servedRoot: served.path, options: .init(precision: .second)) {
            try self.source(server, $0, method: .sessionReaddirOnly)
        }
    }

    func testConformanceWithExecListing() async throws {
        let server = try SSHServer()
        let served = TemporaryDirectory("sftp-served")
        try await SourceConformance.run(servedRoot: served.path, options: .init(precision: .nanosecond)) {
            try self.source(server, $0, method: .execOnly)
        }
    }

    /// `ForceCommand internal-sftp`: exec yields an SFTP server instead of find; the listing falls back to readdir.
    func testServerWithoutExecFallsBackToReaddir() async throws {
        let server = try SSHServer(forceInternalSFTP: true)
        let served = TemporaryDirectory("sftp-served")
        ConformanceTree.create(at: served.path)
        let execOnly = try source(server, served.path, method: .execOnly)
        let error = await snapshotError(execOnly)
        XCTAssertEqual(error?.code, .protocolViolation)
        try await SourceConformance.run(servedRoot: served.path, options: .init(precision: .second)) {
            try self.source(server, $0, method: .automatic)
        }
    }
}
