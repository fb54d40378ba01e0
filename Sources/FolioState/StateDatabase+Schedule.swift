import Foundation
import GRDB

/// The daemon's side of the state database (migration 2): the next scheduled run of each target and the live
/// progress of a run, so that `folio status`, another process, can show them.
extension StateDatabase {
    /// One target's row, as `folio status` reads it.
    public struct ScheduleRow: Sendable, Equatable {
        /// The target's name.
        public var target: String
        /// The daemon that wrote it; the row means nothing once that process is gone.
        public var daemonPID: Int32
        /// When the daemon runs the target next; nil while it runs.
        public var nextRunAt: Date?
        /// Set while a run of the target has work to do.
        public var progress: Progress?

        /// A run's live counters: how much of what its plan downloads is done.
        public struct Progress: Sendable, Equatable {
            /// Files installed so far.
            public var filesDone: Int
            /// Files the plan downloads.
            public var filesTotal: Int
            /// Bytes copied so far.
            public var bytesDone: Int64
            /// Bytes the plan downloads.
            public var bytesTotal: Int64

            /// Counters from their values.
            public init(filesDone: Int, filesTotal: Int, bytesDone: Int64, bytesTotal: Int64) {
                self.filesDone = filesDone
                self.filesTotal = filesTotal
                self.bytesDone = bytesDone
                self.bytesTotal = bytesTotal
            }
        }
    }

    /// Starts a daemon's schedule: forgets every row (a previous daemon's are stale) and writes one per target.
    public func resetSchedule(daemonPID: Int32, nextRuns: [String: Date]) throws {
        try perform { try queue.write { db in
            try db.execute(sql: "DELETE FROM schedule")
            for (target, date) in nextRuns {
                try db.execute(sql: "INSERT INTO schedule (target, daemon_pid, next_run_at) VALUES (?, ?, ?)",
                               arguments: [target, daemonPID, date.timeIntervalSince1970])
            }
        } }
    }

    /// Sets when a target runs next (nil while it runs), keeping its progress.
    public func setNextRun(target: String, daemonPID: Int32, at date: Date?) throws {
        try perform { try queue.write { db in
            try db.execute(sql: """
                INSERT INTO schedule (target, daemon_pid, next_run_at) VALUES (?, ?, ?)
                ON CONFLICT(target) DO UPDATE SET daemon_pid = excluded.daemon_pid, next_run_at = excluded.next_run_at
                """, arguments: [target, daemonPID, date?.timeIntervalSince1970])
        } }
    }

    /// Sets (or with nil clears) the live counters of a target's run.
    public func setProgress(target: String, daemonPID: Int32, _ progress: ScheduleRow.Progress?) throws {
        try perform { try queue.write { db in
            try db.execute(sql: """
                INSERT INTO schedule (target, daemon_pid, files_done, files_total, bytes_done, bytes_total) VALUES (?, ?, ?, ?, ?, ?)
                ON CONFLICT(target) DO UPDATE SET daemon_pid = excluded.daemon_pid, files_done = excluded.files_done,
                    files_total = excluded.files_total, bytes_done = excluded.bytes_done, bytes_total = excluded.bytes_total
                """, arguments: [target, daemonPID, progress?.filesDone, progress?.filesTotal, progress?.bytesDone, progress?.bytesTotal])
        } }
    }

    /// Forgets the rows of targets that are no longer scheduled (after a reload), or all of them (`keeping` empty).
    public func forgetSchedules(keeping targets: Set<String>) throws {
        try perform { try queue.write { db in
            let names = try String.fetchAll(db, sql: "SELECT target FROM schedule")
            for name in names where !targets.contains(name) {
                try db.execute(sql: "DELETE FROM schedule WHERE target = ?", arguments: [name])
            }
        } }
    }

    /// Every target's row.
    public func schedules() throws -> [String: ScheduleRow] {
        try perform { try queue.read { db in
            var rows: [String: ScheduleRow] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT target, daemon_pid, next_run_at, files_done, files_total, bytes_done, bytes_total FROM schedule") {
                var progress: ScheduleRow.Progress?
                if let filesDone = try row.decode(Int?.self, atIndex: 3), let filesTotal = try row.decode(Int?.self, atIndex: 4), let bytesDone = try row.decode(Int64?.self, atIndex: 5), let bytesTotal = try row.decode(Int64?.self, atIndex: 6) {
                    progress = ScheduleRow.Progress(filesDone: filesDone, filesTotal: filesTotal, bytesDone: bytesDone, bytesTotal: bytesTotal)
                }
                let schedule = try ScheduleRow(target: row.decode(atIndex: 0), daemonPID: row.decode(atIndex: 1), nextRunAt: row.decode(Double?.self, atIndex: 2).map { Date(timeIntervalSince1970: $0) },
                                           progress: progress)
                rows[schedule.target] = schedule
            }
            return rows
        } }
    }
}
