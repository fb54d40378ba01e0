import Foundation
import Glibc
import XCTest

/// The built `folio` binary run as a child process, its standard error in a file the test reads.
/// Stopped by its pid: `stop()` (SIGTERM, then SIGKILL) runs in the test's teardown if the test did not.
final class DaemonProcess: @unchecked Sendable {
    // Why @unchecked: `process` is used from the test's thread only; Foundation's Process is not Sendable.
    let process = Process()
    let logPath: String

    /// The products folder (`.build/debug` or the like), where the test bundle and `folio` are built.
    static var binary: URL {
        let products = Bundle.main.bundleURL
        let candidates = [products.appendingPathComponent("folio"), products.deletingLastPathComponent().appendingPathComponent("folio")]
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0.path) } ?? candidates[0]
    }

    /// Starts `folio ARGUMENTS` with the environment the test gives (on top of PATH and HOME).
    init(_ arguments: [String], environment: [String: String], logPath: String) throws {
        self.logPath = logPath
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        process.executableURL = Self.binary
        process.arguments = arguments
        var env = ["PATH": "/usr/bin:/bin", "HOME": NSTemporaryDirectory()]
        env.merge(environment) { $1 }
        process.environment = env
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle(forWritingAtPath: logPath)
        process.standardError = FileHandle(forWritingAtPath: logPath)
        try process.run()
    }

    var pid: Int32 { process.processIdentifier }

    /// Everything the process logged so far.
    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    func signal(_ number: Int32) { kill(pid, number) }

    /// Waits up to `seconds` for the process to exit; its exit status, or nil if it still runs.
    func waitForExit(seconds: Double) -> Int32? {
        let deadline = Date().addingTimeInterval(seconds)
        while process.isRunning && Date() < deadline { usleep(20_000) }
        guard !process.isRunning else { return nil }
        return process.terminationReason == .exit ? process.terminationStatus : 128 + process.terminationStatus
    }

    /// Ends the process whatever state it is in; never leaves a daemon running after a test.
    func stop() {
        guard process.isRunning else { return }
        kill(pid, SIGTERM)
        if waitForExit(seconds: 10) == nil {
            kill(pid, SIGKILL)
            process.waitUntilExit()
        }
    }

    deinit { stop() }

    /// Runs `folio ARGUMENTS` to the end (bounded): its exit status and combined output.
    static func runToEnd(_ arguments: [String], environment: [String: String], logPath: String, seconds: Double = 60) throws -> (status: Int32, output: String) {
        let child = try DaemonProcess(arguments, environment: environment, logPath: logPath)
        guard let status = child.waitForExit(seconds: seconds) else {
            child.stop()
            throw NSError(domain: "folio", code: 1, userInfo: [NSLocalizedDescriptionKey: "folio \(arguments) did not finish in \(seconds) s"])
        }
        return (status, child.log)
    }
}

/// Polls `condition` until it holds or `seconds` pass; a generous deadline, never a timing assertion.
func eventually(_ seconds: Double, _ what: String, file: StaticString = #filePath, line: UInt = #line, _ condition: () -> Bool) {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if condition() { return }
        usleep(50_000)
    }
    if !condition() { XCTFail("not within \(seconds) s: \(what)", file: file, line: line) }
}
