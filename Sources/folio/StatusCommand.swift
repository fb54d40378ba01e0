import ArgumentParser
import FolioCore
import FolioState
import Foundation

/// `folio status [--json]`: each target's last run, from the state database.
struct StatusCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show each target's last run, whether it is running now, and when the daemon runs it next.")

    @Option(name: .long, help: "Configuration file (default: $FOLIO_CONFIG, else /etc/folio/folio.toml).")
    var config: String?

    @Flag(name: .long, help: "One JSON object per target, one per line.")
    var json = false

    func run() throws {
        let path = Config.location(explicit: config)
        // Status works without a configuration too (after `folio mirror`), from the state database alone.
        let loaded: Config?
        do {
            loaded = try Config.load(path: path)
        } catch {
            // A file named (by --config or $FOLIO_CONFIG) must be there; only the default may be missing.
            let named = config != nil || ProcessInfo.processInfo.environment["FOLIO_CONFIG"].map { !$0.isEmpty } == true
            if named || FileManager.default.fileExists(atPath: path) { throw CLIError.usage(error.description) }
            loaded = nil
        }
        let directory = StateLocation.directory(configured: loaded?.stateDirectory)
        let database: StateDatabase
        do {
            database = try StateDatabase(directory: directory)
        } catch {
            FileDescriptorOutput.writeToStandardError("folio: \(error.message)\n")
            throw ExitStatus.runFailed.exitCode
        }
        // A run whose process is gone (kill -9, a crash, a power cut) never recorded its end: it was interrupted.
        let runs = try database.lastRuns().mapValues { run in
            guard run.result == "running", let pid = run.pid, !DaemonView.isAlive(pid) else { return run }
            var ended = run
            ended.result = "interrupted"
            ended.error = "its process (pid \(pid)) ended before the run did; the next run resumes"
            return ended
        }
        let schedules = try database.schedules()
        var names = loaded?.targets.map(\.name) ?? []
        names += runs.keys.filter { !names.contains($0) }.sorted()
        if names.isEmpty && !json { print("no targets yet (configuration: \(path), state: \(directory))") }
        for name in names {
            let target = loaded?.targets.first { $0.name == name }
            let run = runs[name]
            if json {
                var object: [String: any Sendable] = ["event": "status", "target": name]
                if let target { object["enabled"] = target.enabled; object["mode"] = target.mode.rawValue }
                if Self.isLeftOver(name, target: target, loaded: loaded) { object["configured"] = false }
                if let run {
                    object["result"] = run.result
                    object["started_at"] = ISO8601DateFormatter().string(from: run.startedAt)
                    if let ended = run.endedAt {
                        object["ended_at"] = ISO8601DateFormatter().string(from: ended)
                        object["seconds"] = JSONLine.seconds(ended.timeIntervalSince(run.startedAt))
                        object["downloaded"] = run.downloaded
                        object["updated"] = run.updated
                        object["removed"] = run.removed
                        object["trashed"] = run.trashed
                        object["bytes"] = run.bytes
                        object["failed"] = run.failed
                    }
                    if let error = run.error { object["error"] = error }
                }
                let live = DaemonView(run: run, schedule: schedules[name])
                object["running"] = live.running
                if let next = live.nextRunAt { object["next_run_at"] = ISO8601DateFormatter().string(from: next) }
                if let progress = live.progress {
                    object["files_done"] = progress.filesDone
                    object["files_total"] = progress.filesTotal
                    object["bytes_done"] = progress.bytesDone
                    object["bytes_total"] = progress.bytesTotal
                }
                print(JSONLine.encode(object), terminator: "")
            } else {
                print(Self.describe(name, target: target, run: run, leftOver: Self.isLeftOver(name, target: target, loaded: loaded)))
                for line in DaemonView(run: run, schedule: schedules[name]).lines() { print("  " + line) }
            }
        }
    }

    /// Whether `name` has runs in the state database but no longer a target in the configuration (renamed or
    /// removed); `folio mirror`'s targets never have one.
    private static func isLeftOver(_ name: String, target: TargetConfig?, loaded: Config?) -> Bool {
        loaded != nil && target == nil && !name.hasPrefix("mirror:")
    }

    static func describe(_ name: String, target: TargetConfig?, run: StateDatabase.RunRow?, leftOver: Bool) -> String {
        var line = name
        if let target, !target.enabled { line += " (disabled)" }
        if leftOver { line += " (no longer in the configuration)" }
        guard let run else { return line + ": never run" }
        let formatter = DateFormatter()
        formatter.dateFormat = "yyyy-MM-dd HH:mm:ss"
        line += ": \(run.result) \(run.result == "running" ? "since" : "at") \(formatter.string(from: run.startedAt))"
        if let ended = run.endedAt { line += " (\(String(format1: ended.timeIntervalSince(run.startedAt))) s)" }
        // Why no counts for a run that never ended: they are recorded at its end, so a run still going, or one
        // whose process was killed, would read "0 added" with its files in place (the running one's progress is
        // on the line below, when the daemon runs it).
        if run.result != "unchanged", run.endedAt != nil {
            line += ", \(run.downloaded) added, \(run.updated) updated, \(run.removed) removed, \(ByteCount.format(run.bytes))"
        }
        if run.failed > 0 { line += ", \(run.failed) failed" }
        if let error = run.error { line += " — \(error)" }
        return line
    }
}
