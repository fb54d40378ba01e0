import ArgumentParser
import FolioCore

/// Folio's documented exit codes.
enum ExitStatus: Int32 {
    /// Every target is in step.
    case success = 0
    /// A target's run failed, or was stopped (Ctrl-C, SIGTERM); its destination was left consistent.
    case runFailed = 1
    /// Bad usage or configuration.
    case usage = 2
    /// Finished, but some files failed; they are retried next run.
    case someFilesFailed = 3
    /// A safety guard refused the run.
    case refused = 4

    /// The status of one target's run.
    init(_ report: RunReport) {
        switch report.result {
        case .failed, .interrupted: self = .runFailed
        case .refused: self = .refused
        case .synced, .unchanged: self = report.isClean ? .success : .someFilesFailed
        }
    }

    /// The worst of several runs: a failure outranks a refusal, which outranks failed files.
    static func combined(_ reports: [RunReport]) -> ExitStatus {
        let ranked: [ExitStatus] = [.runFailed, .refused, .someFilesFailed]
        let statuses = reports.map(ExitStatus.init)
        return ranked.first { statuses.contains($0) } ?? .success
    }

    var exitCode: ExitCode { ExitCode(rawValue) }
}
