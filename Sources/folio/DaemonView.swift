import FolioCore
import FolioState
import Foundation
import Glibc

/// What `folio status` adds from the daemon's rows: whether a target runs now (and how far it got), and when the
/// daemon runs it next. Rows left by a process that is gone are ignored, so a dead daemon shows nothing stale.
struct DaemonView {
    var running = false
    var progress: StateDatabase.ScheduleRow.Progress?
    var nextRunAt: Date?
    var runnerPID: Int32?

    init(run: StateDatabase.RunRow?, schedule: StateDatabase.ScheduleRow?) {
        if let run, run.result == "running", let pid = run.pid, Self.isAlive(pid) {
            running = true
            runnerPID = pid
            if let schedule, schedule.daemonPID == pid { progress = schedule.progress }
        }
        if let schedule, Self.isAlive(schedule.daemonPID) { nextRunAt = schedule.nextRunAt }
    }

    /// "running now (pid 812): 1,204/5,000 files, 1.2 GiB/4.0 GiB" and "next run: 2026-11-22 12:07:00 (in 4m)".
    func lines(now: Date = Date()) -> [String] {
        var lines: [String] = []
        if running, let pid = runnerPID {
            var line = "running now (pid \(pid))"
            if let progress {
                line += ": \(progress.filesDone)/\(progress.filesTotal) files, \(ByteCount.format(progress.bytesDone))/\(ByteCount.format(progress.bytesTotal))"
            }
            lines.append(line)
        }
        if let nextRunAt {
            let formatter = DateFormatter()
            formatter.dateFormat = "yyyy-MM-dd HH:mm:ss"
            let seconds = Int(nextRunAt.timeIntervalSince(now).rounded(.up))
            lines.append("next run: \(formatter.string(from: nextRunAt)) (\(seconds <= 0 ? "due now" : "in " + DurationText.describe(seconds: seconds)))")
        }
        return lines
    }

    /// Whether a process exists (EPERM: it does, owned by another user such as `folio`).
    static func isAlive(_ pid: Int32) -> Bool {
        pid > 0 && (kill(pid, 0) == 0 || errno == EPERM)
    }
}
