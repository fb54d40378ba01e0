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

    /// Runs folio to completion. `unprivileged` runs it as `nobody` when the tests run as root (root ignores
    /// file permissions, so permission tests need another user). `launcher` is a command folio runs under, such
    /// as `["/usr/bin/faketime", "-f", "-40d"]`.
    public static func run(_ arguments: [String], environment: [String: String] = [:], unprivileged: Bool = false,
                           launcher: [String] = [], currentDirectory: String? = nil) -> Outcome {
        let process = start(arguments, environment: environment, unprivileged: unprivileged, launcher: launcher,
                            currentDirectory: currentDirectory)
        let stdout = process.standardOutputPipe.fileHandleForReading.readDataToEndOfFile()
        let stderr = process.standardErrorPipe.fileHandleForReading.readDataToEndOfFile()
        process.process.waitUntilExit()
        return Outcome(status: process.process.terminationStatus, stdout: String(decoding: stdout, as: UTF8.self),
                       stderr: String(decoding: stderr, as: UTF8.self))
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
