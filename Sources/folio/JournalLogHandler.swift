import FolioCore
import Foundation
import Glibc
import Logging

/// Writes one line per log message to standard error, for journald. Under systemd (`JOURNAL_STREAM` set) each
/// line starts with its syslog priority (`<6>`), which journald turns into the entry's level and strips;
/// elsewhere it starts with the time and level, for a person reading a terminal or a test reading a file.
struct JournalLogHandler: LogHandler {
    var logLevel: Logger.Level
    var metadata: Logger.Metadata = [:]
    private let underJournal: Bool
    private let timestamped: Bool

    /// - Parameter timestamped: whether a line outside the journal starts with the time: the daemon's do (a log
    ///   read later); a run by hand's do not (read as it happens, beside its other lines).
    init(level: Logger.Level, timestamped: Bool = true, environment: [String: String] = ProcessInfo.processInfo.environment) {
        logLevel = level
        self.timestamped = timestamped
        underJournal = !(environment["JOURNAL_STREAM"] ?? "").isEmpty
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var merged = metadata
        if let extra = event.metadata { merged.merge(extra) { $1 } }
        var text = "\(event.message)"
        if !merged.isEmpty {
            text += " " + merged.keys.sorted().map { "\($0)=\(merged[$0]!)" }.joined(separator: " ")
        }
        // One event is one line, and text only: a newline inside a message (a server's error text) would split it
        // in the journal and forge a line of its own, an escape sequence would drive the terminal that shows it.
        text = RelativePath.display(text.utf8)
        let line: String
        if underJournal {
            line = "<\(Self.priority(event.level))>\(text)\n"
        } else {
            line = "\(timestamped ? Self.timestamp() + " " : "")\(event.level): \(text)\n"
        }
        // Why one write(2): stderr is shared by every task that logs, and a single write of a line is not
        // interleaved with another's (lines are far below PIPE_BUF in practice, and journald reads by line).
        _ = line.withCString { write(STDERR_FILENO, $0, strlen($0)) }
    }

    /// syslog(3) priorities, as journald reads them from a line's `<N>` prefix.
    static func priority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: 7
        case .info: 6
        case .notice: 5
        case .warning: 4
        case .error: 3
        case .critical: 2
        }
    }

    private static func timestamp() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var parts = tm()
        var seconds = now.tv_sec
        localtime_r(&seconds, &parts)
        var buffer = [CChar](repeating: 0, count: 32)
        strftime(&buffer, buffer.count, "%Y-%m-%d %H:%M:%S", &parts)
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
