import FolioCore

/// The line (or few) that end every target's run, e.g.
/// `photos: 120 added, 3 updated, 2 removed (in trash), 1.2 GiB in 14.2 s`.
enum Summary {
    /// How many failed files a run names one line each, on a terminal or in the log; past it, one line says that
    /// more failed. Why: one cause (a read-only folder) fails every file, and 378 alike lines bury the summary,
    /// which counts them all and names the first (`--json` still lists each one).
    static let failureLinesShown = 10

    /// What to print for a run's `number`th failed file (from 1): its own `line` up to `failureLinesShown`, then
    /// once a line that stands for the rest, then nothing.
    static func failureLine(_ number: Int, target: String, line: String) -> String? {
        if number <= failureLinesShown { return line }
        return number == failureLinesShown + 1 ? "\(target): more files failed; the summary counts them all" : nil
    }

    static func lines(for report: RunReport) -> [String] {
        let name = report.target
        let time = "\(String(format1: report.seconds)) s"
        var lines: [String] = []
        switch report.result {
        case .failed:
            lines.append("\(name): failed: \(report.error ?? "unknown error")")
        case .refused:
            lines.append("\(name): refused: \(report.error ?? "a safety guard stopped the run")")
        case .interrupted where report.runID == nil && !report.dryRun:
            // Stopped before the engine began it (waiting for another run's lock): there is nothing to resume.
            lines.append("\(name): \(report.error ?? "stopped"); nothing was started")
        case .interrupted:
            let kept = report.bytesInPartialFiles > 0 ? ", and \(ByteCount.format(report.bytesInPartialFiles)) in partial files" : ""
            lines.append("\(name): interrupted after \(CountText.of(report.downloaded + report.updated, "file")), \(ByteCount.format(report.bytes))\(kept); the next run resumes")
        case .unchanged:
            lines.append(report.dryRun ? "\(name): nothing to do (dry run)" : "\(name): unchanged, checked in \(time)")
        case .synced:
            var parts: [String] = []
            let verb = report.dryRun ? "would be " : ""
            if report.downloaded > 0 { parts.append("\(report.downloaded) \(verb)added") }
            if report.updated > 0 { parts.append("\(report.updated) \(verb)updated") }
            if report.removed > 0 { parts.append("\(report.removed) \(verb)removed\(report.trashFolder != nil ? " (in trash)" : "")") }
            if report.createdFolders > 0 { parts.append("\(CountText.of(report.createdFolders, "folder")) \(verb)created") }
            if parts.isEmpty {
                // Records alone: the files already here were taken as the source's (a destination moved with the
                // target pointed at it, an existing copy), and no time was set, which "times and" claimed.
                let brought = report.retimedFolders > 0 ? "times and records brought up to date" : "records brought up to date"
                parts.append(report.dryRun ? "records would be brought up to date" : report.failures.isEmpty ? brought : "nothing copied")
            }
            if report.dryRun {
                lines.append("\(name) (dry run): \(parts.joined(separator: ", ")), \(ByteCount.format(report.bytes)) to copy")
            } else {
                lines.append("\(name): \(parts.joined(separator: ", ")), \(ByteCount.format(report.bytes)) in \(time)")
            }
        }
        // A run that failed on a file's error (a full disk) has said it on its own line.
        if !report.failures.isEmpty, !(report.result == .failed && report.failures[0].message == report.error) {
            let first = report.failures[0]
            lines.append("\(name): \(report.failures.count) failed, retried next run; first: \(first.message)")
        }
        if !report.localChanges.isEmpty {
            // A folder is named with its slash, and counted as an entry, not a file: it went whole, with what it held.
            let shown = report.localChanges.prefix(5).map { report.localChangedFolders.contains($0) ? "\($0)/" : $0.description }.joined(separator: ", ")
            let more = report.localChanges.count > 5 ? " and \(report.localChanges.count - 5) more" : ""
            let one = report.localChanges.count == 1
            let count = report.localChangedFolders.isEmpty ? CountText.of(report.localChanges.count, "local file")
                : CountText.of(report.localChanges.count, "local entry", plural: "local entries")
            let files = "\(count) that folio did not write or that changed here"
            if report.dryRun {
                let place = report.trashFolder.map { "moved to the trash in \($0)" } ?? "deleted (trash-days = 0)"
                lines.append("\(name) (dry run): \(files) would be \(place): \(shown)\(more)")
            } else if let trash = report.trashFolder {
                lines.append("\(name): \(files) \(one ? "was" : "were") moved to the trash: \(shown)\(more) (kept in \(trash))")
            } else {
                lines.append("\(name): \(files) \(one ? "was" : "were") deleted (trash-days = 0): \(shown)\(more)")
            }
        }
        let unread = report.issues.filter(\.blocksRemovals)
        if let first = unread.first, report.result == .synced || report.result == .unchanged {
            // Why a line of its own: the notice above it scrolls by, and "unchanged" alone would read as in step.
            let held = report.withheldRemovals > 0 ? ", and \(CountText.of(report.withheldRemovals, "removal")) held back" : ""
            let one = unread.count == 1
            let what = one ? "a part of the source could not be listed (\(first))" : "\(unread.count) parts of the source could not be listed (first: \(first))"
            // Why not one fix for all: the cause is a permission, a server's error or a page that is no listing,
            // and each issue's own line above says what to do about it.
            lines.append("\(name): \(what); nothing there was copied or removed\(held); fix \(one ? "it" : "them") at the source as said above, or exclude \(one ? "it" : "them"); the next run tries again")
        } else if report.withheldRemovals > 0 {
            lines.append("\(name): \(CountText.of(report.withheldRemovals, "removal")) held back because part of the source could not be listed; fix the listing errors above")
        }
        return lines
    }
}
