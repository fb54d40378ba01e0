import Foundation
import Glibc

/// Every thread's stack of a running process, for the report of a test that hung.
public enum ThreadStacks {
    /// gdb's backtrace of every thread of `pid` (it stops the process for a moment), or what the kernel says each
    /// thread waits in when gdb is missing or cannot attach.
    public static func of(_ pid: pid_t) -> String {
        let gdb = "/usr/bin/gdb"
        if FileManager.default.isExecutableFile(atPath: gdb),
           let report = output(of: gdb, ["-p", "\(pid)", "-batch", "-nx", "-ex", "thread apply all bt"]) {
            // Only the stacks: gdb also says much about the symbols it reads.
            let stacks = report.split(separator: "\n").filter { $0.hasPrefix("Thread ") || $0.hasPrefix("#") }
            if !stacks.isEmpty { return stacks.joined(separator: "\n") }
        }
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        return tasks.sorted().map { task in
            let wchan = (try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/wchan", encoding: .utf8)) ?? "?"
            return "thread \(task) waits in \(wchan)"
        }.joined(separator: "\n")
    }

    private static func output(of tool: String, _ arguments: [String]) -> String? {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        process.standardInput = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return nil }
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }
}
