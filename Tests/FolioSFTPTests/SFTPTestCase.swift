@testable import FolioCore
@testable import FolioSFTP
import FolioTestSupport
import Foundation
import Glibc
import XCTest

/// Helpers shared by the SFTP tests: sources pointed at a test sshd.
class SFTPTestCase: XCTestCase {
    func settings(_ server: SSHServer, identity: String? = nil, knownHosts: String? = nil) -> SourceSettings {
        var settings = SourceSettings()
        settings.identity = identity ?? server.userKeyPath
        settings.knownHosts = knownHosts ?? server.knownHostsPath
        return settings
    }

    func source(_ server: SSHServer, _ root: String, method: SFTPLister.Method = .automatic, identity: String? = nil,
                knownHosts: String? = nil, timeout: Int = 10) throws -> SFTPSource {
        var source = try SFTPSource(location: SourceLocation(parsing: server.url(root)), settings: settings(server, identity: identity, knownHosts: knownHosts),
                                    timeout: timeout, transfers: 4)
        source.listingMethod = method
        return source
    }

    /// A source reaching `server`'s folder `root` through `proxy`, with one download worker. The proxy's port
    /// needs its own known_hosts line, with the server's key: written in a temporary folder of its own.
    func source(_ server: SSHServer, _ root: String, through proxy: DelayProxy) throws -> SFTPSource {
        let folder = TemporaryDirectory("known-hosts-proxy")
        // Removed at the test's end (see `TemporaryDirectory`): a block that only held it kept it to the process's end.
        addTeardownBlock { try? FileManager.default.removeItem(atPath: folder.path) }
        let line = try String(contentsOfFile: server.knownHostsPath, encoding: .utf8)
        FixtureTree.write(folder.path, "known_hosts", line.replacingOccurrences(of: "]:\(server.port) ", with: "]:\(proxy.port) "))
        let url = server.url(root).replacingOccurrences(of: ":\(server.port)/", with: ":\(proxy.port)/")
        return try SFTPSource(location: SourceLocation(parsing: url), settings: settings(server, knownHosts: folder.path("known_hosts")),
                              timeout: 10, transfers: 1)
    }

    /// A test sshd whose commands find `command` as the shell script `script` first on their PATH (a `find` that
    /// sleeps, a `tar` that dies), and the folder holding it, which must live as long as the server is used.
    func server(running script: String, as command: String) throws -> (server: SSHServer, tools: TemporaryDirectory) {
        let tools = TemporaryDirectory("tools-\(command)")
        FixtureTree.write(tools.path, command, "#!/bin/sh\n" + script)
        XCTAssertEqual(chmod(tools.path(command), 0o755), 0)
        return (try SSHServer(commandPath: "\(tools.path):/usr/bin:/bin"), tools)
    }

    /// The error a snapshot throws, as a `SourceError` (failing the test when it succeeds).
    func snapshotError(_ source: SFTPSource, file: StaticString = #filePath, line: UInt = #line) async -> SourceError? {
        do {
            let snapshot = try await source.snapshot(options: ListingOptions())
            XCTFail("snapshot succeeded with \(snapshot.entries.count) entries", file: file, line: line)
            return nil
        } catch let error as SourceError {
            return error
        } catch {
            XCTFail("not a SourceError: \(error)", file: file, line: line)
            return nil
        }
    }

    /// A snapshot's entries as comparable text; mtimes at whole seconds (what both listing paths share).
    func summary(_ snapshot: Snapshot) -> [String] {
        snapshot.entries.map { "\($0.path) \($0.kind) \($0.size) \($0.mtime.seconds)" }
    }

    /// Runs blocking connection work on its own queue, as the engine's workers do, and awaits it.
    static func onWorker<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue(label: "test.worker").async { continuation.resume(with: Result { try body() }) }
        }
    }

    /// Fetches `entries` in one batch on a worker queue, as the engine does. Returns, per entry path, the bytes of
    /// the files marked complete (nil for the others).
    func fetchBatch(_ source: SFTPSource, _ entries: [Entry]) async throws -> [String: [UInt8]?] {
        try await fetchBatches(source, [entries])[0]
    }

    /// Fetches each of `batches` in turn over one connection, as one download worker does.
    func fetchBatches(_ source: SFTPSource, _ batches: [[Entry]]) async throws -> [[String: [UInt8]?]] {
        let scratch = TemporaryDirectory("batch-out")
        return try await withCheckedThrowingContinuation { continuation in
            DispatchQueue(label: "test.worker").async {
                continuation.resume(with: Result {
                    let connection = try source.makeConnection()
                    defer { connection.close() }
                    return try batches.map { entries in try BatchFetch.fetch(entries, with: connection, into: scratch) }
                })
            }
        }
    }

    func files(_ snapshot: Snapshot) -> [Entry] { snapshot.entries.filter { $0.kind == .file } }
}
