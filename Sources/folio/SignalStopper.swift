import CFolioSys
import Dispatch
import Foundation
import FolioCore
import Glibc

/// Turns the first SIGINT, SIGTERM or SIGHUP into a clean stop of every running target (workers stop between
/// chunks, partial files stay; a source still connecting or listing gives up); a second SIGINT exits at once (130).
/// Why SIGHUP: a terminal closed or an SSH connection dropped under `folio sync --now` ended it at once, files in
/// flight and the run's record with it; under `nohup` (SIGHUP ignored from the start) it stays ignored.
final class SignalStopper: @unchecked Sendable {
    // Why @unchecked: `sources` are dispatch sources (thread-safe, not marked Sendable on Linux), set once in init.
    private let running = Locked<(stopped: Bool, runs: [TransferProgress], actions: [@Sendable () -> Void])>((false, [], []))
    private let sources: [DispatchSourceSignal]

    init(reporter: ConsoleReporter) {
        let running = self.running
        var sources: [DispatchSourceSignal] = []
        var signals = [SIGINT, SIGTERM]
        if folio_signal_is_ignored(SIGHUP) == 0 { signals.append(SIGHUP) }
        for signalNumber in signals {
            signal(signalNumber, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
            source.setEventHandler {
                let (again, actions, started) = running.withLock { state in
                    defer { state.stopped = true }
                    for progress in state.runs { progress.cancel() }
                    return (state.stopped, state.stopped ? [] : state.actions, !state.runs.isEmpty)
                }
                if again && signalNumber == SIGINT {
                    // The screen and the JSON stream closed, then out; at most a fifth of a second later whatever
                    // holds the reporter (a write blocked on a stalled terminal), since the user asked to quit now.
                    Thread.detachNewThread {
                        reporter.quitAtOnce()
                        _exit(130)
                    }
                    usleep(200_000)
                    _exit(130)
                }
                // Before any run started (waiting for another's lock, say), there are no files in flight to speak of.
                // Only a Ctrl-C is told of the second one: a SIGTERM comes from systemd or kill, not from a key.
                let secondCtrlC = signalNumber == SIGINT ? "; Ctrl-C again quits at once" : ""
                reporter.note(started ? "stopping: the files in flight keep their partial files for the next run\(secondCtrlC)" : "stopping")
                for action in actions { action() }
            }
            source.resume()
            sources.append(source)
        }
        self.sources = sources
    }

    /// Whether a signal came.
    var isStopped: Bool { running.withLock { $0.stopped } }

    /// Runs `action` when the first signal comes (at once if it came already).
    func whenStopped(_ action: @escaping @Sendable () -> Void) {
        let already = running.withLock { state in
            if !state.stopped { state.actions.append(action) }
            return state.stopped
        }
        if already { action() }
    }

    /// Adds a run to stop on a signal; false when a signal already came.
    func register(_ progress: TransferProgress) -> Bool {
        running.withLock { state in
            guard !state.stopped else { return false }
            state.runs.append(progress)
            return true
        }
    }

    func disarm() {
        for source in sources { source.cancel() }
        signal(SIGINT, SIG_DFL)
        signal(SIGTERM, SIG_DFL)
        if sources.count > 2 { signal(SIGHUP, SIG_DFL) }
    }
}
