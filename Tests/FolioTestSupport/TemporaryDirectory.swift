import Foundation
import Glibc

/// A folder under the system temp directory, removed when the last reference to it goes. A test case that keeps
/// one as a property drops it in `tearDown`: XCTest keeps every test case object, and its teardown blocks, to the
/// end of the process, so a folder held there was never removed (each run of the suite left gigabytes of them).
public final class TemporaryDirectory: @unchecked Sendable {
    // Why @unchecked: `url` is immutable after init; removal happens once, in deinit.
    public let url: URL
    public var path: String { url.path }

    public init(_ label: String = "folio") {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("\(label)-\(UUID().uuidString.prefix(8))")
        try! FileManager.default.createDirectory(at: base, withIntermediateDirectories: true)
        url = base
    }

    public func path(_ relative: String) -> String { url.appendingPathComponent(relative).path }

    deinit {
        // Restore the owner's access to every folder first: tests make folders read-only or unreadable.
        Self.openFolders(url.path)
        try? FileManager.default.removeItem(at: url)
    }

    /// Gives the owner read, write and search permission on `path` and every folder below it (links not
    /// followed). Why not `chmod -R` in a child process: a deinit runs wherever the last reference goes, often on
    /// the cooperative pool at the end of an async test, where Foundation's `Process.waitUntilExit` spins that
    /// thread until its run loop learns of the exit.
    private static func openFolders(_ path: String) {
        var info = stat()
        guard lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFDIR else { return }
        chmod(path, (info.st_mode & 0o7777) | S_IRWXU)
        for name in (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [] { openFolders(path + "/" + name) }
    }
}
