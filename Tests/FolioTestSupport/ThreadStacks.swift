import Foundation
import Glibc

/// Every thread's stack of a running process, for the report of a test that hung.
public enum ThreadStacks {
    /// gdb's backtrace of every thread of `pid` (it stops the process for a moment), or what the kernel says each
    /// thread waits in when gdb is missing or cannot attach. gdb runs through `posix_spawn` and `waitpid`, not
    /// Foundation's `Process`, whose wait is one of the things that can hang.
    public static func of(_ pid: pid_t) -> String {
        let gdb = "/usr/bin/gdb"
        if FileManager.default.isExecutableFile(atPath: gdb),
           let report = try? LoopbackServer.run(gdb, ["-p", "\(pid)", "-batch", "-nx", "-ex", "thread apply all bt"]) {
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
}
