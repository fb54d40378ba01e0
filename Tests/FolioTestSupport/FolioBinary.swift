import FolioCore
import Foundation
import Glibc

/// Runs the built `folio` executable, as users do, and captures what it says.
public enum FolioBinary {
    public struct Outcome: Sendable {
        public var status: Int32
        public var stdout: String
        public var stderr: String

        public var stderrLines: [String] { stderr.split(separator: "\n").map(String.init) }
        public var stdoutLines: [String] { stdout.split(separator: "\n").map(String.init) }
        /// The NDJSON objects on standard output.
        public var events: [[String: Any]] {
            stdoutLines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        }
    }

    /// The `folio` binary next to the test bundle (`swift build` puts both in the same products folder).
    public static var path: String {
        var candidates = [Bundle.main.bundleURL.appendingPathComponent("folio").path]
        for bundle in Bundle.allBundles { candidates.append(bundle.bundleURL.deletingLastPathComponent().appendingPathComponent("folio").path) }
        let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        candidates.append(repository.appendingPathComponent(".build/debug/folio").path)
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) } ?? candidates.last!
    }

    /// How long one run of folio may take before it counts as hung: far beyond any test's run (the slowest take a
    /// few seconds), far below CI's limit.
    public static let hangSeconds = 300

    /// Runs folio to completion. `unprivileged` runs it as `nobody` when the tests run as root (root ignores
    /// file permissions, so permission tests need another user). `launcher` is a command folio runs under, such
    /// as `["/usr/bin/faketime", "-f", "-40d"]`. A run still going after `hangSeconds` is killed, and its outcome
    /// (status -1) carries every thread's stack in `stderr`, so a hang fails its test and says where instead of
    /// stalling the suite.
    public static func run(_ arguments: [String], environment: [String: String] = [:], unprivileged: Bool = false,
                           launcher: [String] = [], currentDirectory: String? = nil) -> Outcome {
        let running = start(arguments, environment: environment, unprivileged: unprivileged, launcher: launcher,
                            currentDirectory: currentDirectory)
        let pid = running.process.processIdentifier
        let exited = DispatchSemaphore(value: 0)
        let hang = Locked<String?>(nil)
        Thread.detachNewThread {
            guard exited.wait(timeout: .now() + .seconds(hangSeconds)) == .timedOut else { return }
            hang.withLock { $0 = "folio did not exit within \(hangSeconds) s and was killed; its threads:\n" + ThreadStacks.of(pid) }
            kill(pid, SIGKILL)
        }
        // Why stderr on a thread of its own: read one pipe after the other, a child filling the second (64 KiB)
        // while the first is drained would block for ever, and so would we.
        let stderr = Locked(Data())
        let stderrRead = DispatchSemaphore(value: 0)
        let stderrHandle = running.standardErrorPipe.fileHandleForReading
        Thread.detachNewThread {
            let data = stderrHandle.readDataToEndOfFile()
            stderr.withLock { $0 = data }
            stderrRead.signal()
        }
        let stdout = running.standardOutputPipe.fileHandleForReading.readDataToEndOfFile()
        stderrRead.wait()
        running.process.waitUntilExit()
        exited.signal()
        let errors = String(decoding: stderr.withLock { $0 }, as: UTF8.self)
        if let hang = hang.withLock({ $0 }) {
            return Outcome(status: -1, stdout: String(decoding: stdout, as: UTF8.self), stderr: errors + hang)
        }
        return Outcome(status: running.process.terminationStatus, stdout: String(decoding: stdout, as: UTF8.self), stderr: errors)
    }

    public struct Running {
        public let process: Process
        public let standardOutputPipe: Pipe
        public let standardErrorPipe: Pipe
    }

    /// Starts folio and returns at once; read its pipes and wait yourself.
    public static func start(_ arguments: [String], environment: [String: String] = [:], unprivileged: Bool = false,
                             launcher: [String] = [], currentDirectory: String? = nil) -> Running {
        let process = Process()
        var command = launcher + [path] + arguments
        if unprivileged && getuid() == 0 {
            command = ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"] + command
        }
        process.executableURL = URL(fileURLWithPath: command[0])
        process.arguments = Array(command.dropFirst())
        var env = ProcessInfo.processInfo.environment
        env["TERM"] = "dumb"
        for (key, value) in environment { env[key] = value }
        process.environment = env
        if let currentDirectory { process.currentDirectoryURL = URL(fileURLWithPath: currentDirectory) }
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        try! process.run()
        return Running(process: process, standardOutputPipe: out, standardErrorPipe: err)
    }
}
