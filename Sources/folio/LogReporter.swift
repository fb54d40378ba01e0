import FolioCore
import Foundation
import Logging
import Synchronization

/// The daemon's observer of runs: one log line per event that matters, progress lines only for runs with work
/// to do, and the live counters the systemd status line and `folio status` are made of.
///
/// An unchanged target logs exactly one line: the start of a run is logged only once its plan shows work (a run
/// that fails or is refused before that says so in its one closing line, with its trigger).
final class LogReporter: SyncEventSink {
    /// A run in progress, as the status line and `folio status` show it.
    struct Running: Sendable {
        var target: String
        var filesDone: Int
        var filesTotal: Int
        var bytesDone: Int64
        var bytesTotal: Int64
        /// Bytes per second since the downloads started.
        var rate: Double
    }

    private struct Live {
        var trigger: TargetConfig.Trigger = .automatic
        var plan: SyncEvent.PlanSummary?
        var progress: TransferProgress?
        var downloadsStarted: Date?
        var failures = 0
    }

    /// Why a mutex: events come from each run's task and from download worker threads, the heartbeat reads the
    /// same table, and a reload replaces the logger.
    private let state: Mutex<(logger: Logger, live: [String: Live])>

    init(logger: Logger) {
        state = Mutex((logger, [:]))
    }

    var logger: Logger {
        get { state.withLock { $0.logger } }
        set { state.withLock { $0.logger = newValue } }
    }

    /// Attaches a run's live counters before it starts.
    func watch(target: String, progress: TransferProgress) {
        state.withLock { $0.live[target, default: Live()].progress = progress }
    }

    func emit(_ event: SyncEvent) {
        let logger = self.logger
        switch event {
        case .started(let target, let source, let destination, let trigger):
            state.withLock { $0.live[target, default: Live()].trigger = trigger }
            logger.debug("\(target): checking \(source) against \(destination) (trigger: \(trigger.rawValue))")
        case .stage(let target, let stage):
            if stage == .downloading { state.withLock { $0.live[target]?.downloadsStarted = Date() } }
            logger.debug("\(target): \(stage.rawValue)")
        case .planned(let target, let summary):
            let trigger = state.withLock { state in
                state.live[target, default: Live()].plan = summary
                return state.live[target]!.trigger
            }
            if summary.downloads + summary.removals + summary.folders + summary.mtimeFixes > 0 {
                logger.info("\(target): run started (trigger: \(trigger.rawValue)): \(Self.describe(summary))")
            }
        case .fileDone(let target, let path, let bytes):
            logger.trace("\(target): copied \(path) (\(ByteCount.format(bytes)))")
        case .fileFailed(let target, let path, let message):
            // Counted and logged under one hold of the lock, as by hand (`ConsoleReporter`): failures come from
            // several workers at once, and the eleventh's "more files failed" could be logged before the tenth.
            state.withLock { state in
                state.live[target, default: Live()].failures += 1
                if let line = Summary.failureLine(state.live[target]!.failures, target: target, line: "\(target): \(path): \(message)") {
                    logger.warning("\(line)")
                }
            }
        case .notice(let target, let message):
            logger.notice("\(target): \(message)")
        case .finished(let report):
            let trigger = state.withLock { $0.live.removeValue(forKey: report.target)?.trigger } ?? .automatic
            let lines = Summary.lines(for: report)
            guard let first = lines.first else { return }
            let level: Logger.Level = switch report.result {
            case .failed, .refused: .error
            case .interrupted: .notice
            case .synced, .unchanged: .info
            }
            logger.log(level: level, "\(first) (trigger: \(trigger.rawValue))")
            for line in lines.dropFirst() { logger.warning("\(line)") }
        }
    }

    /// The runs in progress that have work to do (a plan with downloads).
    func running() -> [Running] {
        state.withLock { state in
            state.live.compactMap { name, live -> Running? in
                guard let plan = live.plan, plan.downloads > 0, let progress = live.progress else { return nil }
                let elapsed = live.downloadsStarted.map { Date().timeIntervalSince($0) } ?? 0
                let bytes = progress.bytesDone
                return Running(target: name, filesDone: progress.filesDone, filesTotal: plan.downloads, bytesDone: bytes,
                               bytesTotal: plan.downloadBytes, rate: elapsed > 0.5 ? Double(bytes) / elapsed : 0)
            }.sorted { $0.target < $1.target }
        }
    }

    /// Logs one progress line for each run that is downloading (called every few seconds by the daemon).
    func logProgress() {
        let logger = self.logger
        for run in running() {
            logger.info("\(run.target): \(run.filesDone)/\(run.filesTotal) files, \(ByteCount.format(run.bytesDone))/\(ByteCount.format(run.bytesTotal)), \(ByteCount.rate(run.rate))")
        }
    }

    private static func describe(_ plan: SyncEvent.PlanSummary) -> String {
        var parts: [String] = []
        if plan.downloads > 0 { parts.append("\(CountText.of(plan.downloads, "file")) to copy (\(ByteCount.format(plan.downloadBytes)))") }
        if plan.removals > 0 { parts.append("\(plan.removals) to remove") }
        if plan.folders > 0 { parts.append("\(CountText.of(plan.folders, "folder")) to create") }
        if plan.mtimeFixes > 0 { parts.append("\(CountText.of(plan.mtimeFixes, "time")) to fix") }
        return parts.joined(separator: ", ")
    }
}
