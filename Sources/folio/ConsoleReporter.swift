import FolioCore
import Foundation
import Glibc
import Synchronization

/// Shows runs to a person or a script: a live block redrawn in place on a terminal, a plain line every few
/// seconds otherwise, or NDJSON events with `--json`. Always ends each target with its summary line.
final class ConsoleReporter: SyncEventSink, @unchecked Sendable {
    // Why @unchecked: `timer` is a dispatch source, which is thread-safe but not marked Sendable on Linux;
    // everything else mutable is behind `state`'s mutex.
    enum Mode: Sendable {
        case terminal, plain, json
    }

    /// Why a mutex: events arrive from the engine's task and from download worker threads, and the redraw
    /// timer reads the same state.
    private let state = Mutex<State>(State())
    let mode: Mode
    private let timer: DispatchSourceTimer

    private struct TargetState {
        var stage = "starting"
        var plan: SyncEvent.PlanSummary?
        var progress: TransferProgress?
        var started = Date()
        var lastPlainLine = Date()
        var failures = 0
    }

    private struct State {
        var targets: [(name: String, state: TargetState)] = []
        var drawnLines = 0
    }

    init(mode: Mode) {
        self.mode = mode
        timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "folio.progress"))
        let interval: DispatchTimeInterval = mode == .terminal ? .milliseconds(250) : .seconds(1)
        timer.schedule(deadline: .now() + interval, repeating: interval)
        timer.setEventHandler { [weak self] in self?.tick() }
        timer.resume()
    }

    deinit { timer.cancel() }

    static func mode(json: Bool) -> Mode {
        if json { return .json }
        let term = ProcessInfo.processInfo.environment["TERM"] ?? ""
        return isatty(STDOUT_FILENO) == 1 && term != "dumb" && !term.isEmpty ? .terminal : .plain
    }

    /// Attaches the live counters of a target's run (set before the run starts).
    func watch(target: String, progress: TransferProgress) {
        state.withLock { state in
            if let index = state.targets.firstIndex(where: { $0.name == target }) {
                state.targets[index].state.progress = progress
            } else {
                var fresh = TargetState()
                fresh.progress = progress
                state.targets.append((target, fresh))
            }
        }
    }

    func emit(_ event: SyncEvent) {
        switch mode {
        case .json: emitJSON(event)
        case .terminal, .plain: emitText(event)
        }
    }

    /// The process quits at once (a second Ctrl-C): the live block gives way to one line, and a JSON stream
    /// still ends with a `target-done` per target under way, as its readers expect.
    func quitAtOnce() {
        let line = "quit at once: the files in flight keep their partial files for the next run"
        let running: [(name: String, state: TargetState)] = state.withLock { state in
            defer { state.targets = [] }
            if mode == .terminal && state.drawnLines > 0 {
                write(String(repeating: "\u{1B}[1A\u{1B}[2K", count: state.drawnLines) + "\r")
                state.drawnLines = 0
            }
            return state.targets
        }
        guard mode == .json else { return FileDescriptorOutput.writeToStandardError(line + "\n") }
        for target in running {
            let seconds = Date().timeIntervalSince(target.state.started)
            // Why no counts: they are made at a run's end, which this one does not reach (`bytes` is the live one).
            write(JSONLine.encode(["event": "target-done", "target": target.name, "result": "interrupted", "error": line,
                                   "bytes": target.state.progress?.bytesDone ?? 0, "seconds": JSONLine.seconds(seconds)]))
        }
    }

    /// A line for the operator outside any target (lock waits and the like).
    func note(_ line: String, target: String? = nil) {
        if mode == .json {
            var fields = ["event": "notice", "message": line]
            if let target { fields["target"] = target }
            write(JSONLine.encode(fields))
        } else {
            printAboveBlock(line, toError: true)
        }
    }

    // MARK: text

    private func emitText(_ event: SyncEvent) {
        switch event {
        case .started(let target, _, _, _):
            update(target) { $0.started = Date() }
        case .stage(let target, let stage):
            update(target) { $0.stage = stage.rawValue }
        case .planned(let target, let summary):
            update(target) { $0.plan = summary }
        case .fileDone:
            break
        case .fileFailed(let target, _, let message):
            // Counted and printed under one hold of the lock: failures come from several workers at once, and the
            // eleventh's "more files failed" could be printed before the tenth's own line.
            let line = Self.shown("\(target): \(message)")
            state.withLock { state in
                var failures = 0
                Self.change(target, in: &state) { $0.failures += 1; failures = $0.failures }
                if let line = Summary.failureLine(failures, target: target, line: line) { printLocked(line, toError: true, &state) }
            }
        case .notice(let target, let message):
            printAboveBlock("\(target): \(message)", toError: false)
        case .finished(let report):
            state.withLock { state in state.targets.removeAll { $0.name == report.target } }
            let failed = report.result == .failed || report.result == .refused || report.result == .interrupted
            for line in Summary.lines(for: report) { printAboveBlock(line, toError: failed) }
        }
    }

    private func update(_ target: String, _ change: (inout TargetState) -> Void) {
        state.withLock { state in Self.change(target, in: &state, change) }
    }

    private static func change(_ target: String, in state: inout State, _ change: (inout TargetState) -> Void) {
        if let index = state.targets.firstIndex(where: { $0.name == target }) {
            change(&state.targets[index].state)
        } else {
            var fresh = TargetState()
            change(&fresh)
            state.targets.append((target, fresh))
        }
    }

    private func tick() {
        switch mode {
        case .terminal:
            state.withLock { state in redraw(&state) }
        case .plain:
            let lines: [String] = state.withLock { state in
                var due: [String] = []
                for index in state.targets.indices where state.targets[index].state.stage == "downloading"
                    && Date().timeIntervalSince(state.targets[index].state.lastPlainLine) >= 5 {
                    state.targets[index].state.lastPlainLine = Date()
                    due.append(Self.progressLine(state.targets[index].name, state.targets[index].state))
                }
                return due
            }
            for line in lines { write(line + "\n") }
        case .json:
            let lines: [String] = state.withLock { state in
                state.targets.compactMap { target in
                    guard target.state.stage == "downloading", let progress = target.state.progress else { return nil }
                    return JSONLine.encode(["event": "progress", "target": target.name, "files": progress.filesDone,
                                            "files_total": target.state.plan?.downloads ?? 0, "bytes": progress.bytesDone,
                                            "bytes_total": target.state.plan?.downloadBytes ?? 0])
                }
            }
            for line in lines { write(line) }
        }
    }

    /// Redraws the live block: one line per running target and one with the files in flight.
    private func redraw(_ state: inout State) {
        var out = String(repeating: "\u{1B}[1A\u{1B}[2K", count: state.drawnLines) + "\r\u{1B}[2K"
        var lines: [String] = []
        let (width, rows) = Self.terminalSize()
        for target in state.targets {
            lines.append(Self.clip(Self.progressLine(Self.fitted(target.name, besides: Self.progressLine("", target.state), width), target.state), width))
            if target.state.stage == "downloading", let progress = target.state.progress {
                let names = progress.inFlight.prefix(4).map { "\($0)" }
                if !names.isEmpty { lines.append(Self.clip("  ↳ " + names.joined(separator: ", "), width)) }
            }
        }
        // Why no more lines than the terminal has rows, less one: lines scrolled off the top cannot be moved up
        // to and erased, and each redraw left them behind.
        lines = Array(lines.prefix(max(1, rows - 1)))
        out += lines.map { $0 + "\n" }.joined()
        state.drawnLines = lines.count
        write(out)
    }

    private func printAboveBlock(_ line: String, toError: Bool) {
        let line = Self.shown(line)
        state.withLock { state in printLocked(line, toError: toError, &state) }
    }

    /// `line` above the live block, with the lock held.
    private func printLocked(_ line: String, toError: Bool, _ state: inout State) {
        if mode == .terminal && state.drawnLines > 0 {
            write(String(repeating: "\u{1B}[1A\u{1B}[2K", count: state.drawnLines) + "\r")
            state.drawnLines = 0
        }
        if toError { FileDescriptorOutput.writeToStandardError(line + "\n") } else { write(line + "\n") }
        if mode == .terminal { redraw(&state) }
    }

    /// A line as text only, on one line: a message may quote a server (a status text, a header), whose newline
    /// would forge a line of output and whose escape sequences would drive the terminal. Names are already shown so.
    private static func shown(_ line: String) -> String { RelativePath.display(line.utf8) }

    private static func progressLine(_ name: String, _ state: TargetState) -> String {
        guard state.stage == "downloading", let plan = state.plan, let progress = state.progress else {
            return "\(name): \(state.stage)…"
        }
        let elapsed = max(0.001, Date().timeIntervalSince(state.started))
        let bytes = progress.bytesDone
        let rate = Double(bytes) / elapsed
        let remaining = max(0, plan.downloadBytes - bytes)
        let counts = "\(name): downloading \(progress.filesDone)/\(plan.downloads) files, \(ByteCount.format(bytes))/\(ByteCount.format(plan.downloadBytes))"
        // No rate in the first second: the first reads arrive in a burst, which read as more than --bwlimit.
        guard elapsed >= 1 else { return counts }
        // Rounded up: "ETA 0s" with a second's worth of bytes still to come read as done.
        let eta = rate > 0 ? " ETA \(DurationText.describe(seconds: Int((Double(remaining) / rate).rounded(.up))))" : ""
        return "\(counts), \(ByteCount.rate(rate))\(eta)"
    }

    /// A target's name cut at its start where the line it begins would not fit: the numbers after it are what a
    /// narrow terminal must still show, and a path's end is the part that tells targets apart.
    private static func fitted(_ name: String, besides rest: String, _ width: Int) -> String {
        let room = width - TerminalColumns.of(rest)
        return room >= 8 ? TerminalColumns.clipStart(name, to: room) : name
    }

    private static func clip(_ line: String, _ width: Int) -> String {
        TerminalColumns.clip(line, to: width)
    }

    /// The terminal's columns and rows (100 × 24 when it does not say).
    private static func terminalSize() -> (columns: Int, rows: Int) {
        var size = winsize()
        guard ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &size) == 0 else { return (100, 24) }
        return (size.ws_col > 0 ? Int(size.ws_col) : 100, size.ws_row > 0 ? Int(size.ws_row) : 24)
    }

    // MARK: json

    private func emitJSON(_ event: SyncEvent) {
        switch event {
        case .started(let target, let source, let destination, let trigger):
            update(target) { $0.started = Date() }
            write(JSONLine.encode(["event": "target-start", "target": target, "source": source, "destination": destination, "trigger": trigger.rawValue]))
        case .stage(let target, let stage):
            update(target) { $0.stage = stage.rawValue }
            write(JSONLine.encode(["event": "stage", "target": target, "stage": stage.rawValue]))
        case .planned(let target, let summary):
            update(target) { $0.plan = summary }
            write(JSONLine.encode(["event": "plan", "target": target, "downloads": summary.downloads, "bytes": summary.downloadBytes,
                                   "removals": summary.removals, "folders": summary.folders, "mtime_fixes": summary.mtimeFixes]))
        case .fileDone(let target, let path, let bytes):
            write(JSONLine.fileDone(target: target, path: path.description, bytes: bytes))
        case .fileFailed(let target, let path, let message):
            write(JSONLine.encode(["event": "file-failed", "target": target, "path": path.description, "message": message]))
        case .notice(let target, let message):
            write(JSONLine.encode(["event": "notice", "target": target, "message": message]))
        case .finished(let report):
            state.withLock { state in state.targets.removeAll { $0.name == report.target } }
            var object: [String: any Sendable] = [
                "event": "target-done", "target": report.target, "result": report.result.rawValue,
                "downloaded": report.downloaded, "updated": report.updated, "removed": report.removed, "trashed": report.trashed,
                "created_dirs": report.createdFolders, "bytes": report.bytes, "failed": report.failed,
                "seconds": JSONLine.seconds(report.seconds),
            ]
            if let error = report.error { object["error"] = error }
            if report.dryRun { object["dry_run"] = true }
            if !report.localChanges.isEmpty { object["local_changes"] = report.localChanges.map(\.description) }
            write(JSONLine.encode(object))
        }
    }

    /// Writes to standard output directly (a JSON run writes a line per file).
    private func write(_ text: String) {
        var text = text
        text.withUTF8 { FileDescriptorOutput.writeAll(UnsafeRawBufferPointer($0), to: STDOUT_FILENO) }
    }
}
