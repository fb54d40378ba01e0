import Dispatch
import FolioCore
import FolioState
import Foundation
import Glibc
import Logging

/// Runs a set of targets for `folio sync --now` and `folio mirror`: one lock per target, one after another (or
/// `--parallel-targets` at once), Ctrl-C and SIGTERM stop cleanly, and the exit code says how it went.
struct RunCoordinator {
    let stateDirectory: String
    let reporter: ConsoleReporter
    let options: SyncEngine.RunOptions
    let parallelTargets: Int
    /// Wait for a target another process is syncing (else exit 1 at once).
    let waitForLock: Bool

    func run(_ targets: [TargetConfig]) async -> ExitStatus {
        let loading = SourceFactory.preloadLibraries(for: targets)
        // First, before the state database opens: a Ctrl-C from the start on stops the run.
        let stopper = SignalStopper(reporter: reporter)
        defer { stopper.disarm() }
        // Why a task of its own, cancelled by a stop: as the daemon's stop cancels its runs, a source still
        // connecting or listing then gives up at once, rather than after its timeout and retries.
        let work = Task { await runTargets(targets, stopper: stopper) }
        stopper.whenStopped { work.cancel() }
        let status = await work.value
        // Why wait: a run that fails at once (no state database, a busy target) would otherwise exit while a
        // library is still loading on another thread, and run the libraries' destructors under it.
        await withCheckedContinuation { continuation in loading.notify(queue: .global()) { continuation.resume() } }
        return status
    }

    private func runTargets(_ targets: [TargetConfig], stopper: SignalStopper) async -> ExitStatus {
        let directory = stateDirectory
        let database: StateDatabase
        do {
            database = try await Blocking.run { () throws(StateError) in try StateDatabase(directory: directory) }
        } catch {
            FileDescriptorOutput.writeToStandardError("folio: \(error.message)\n")
            return .runFailed
        }
        let engine = SyncEngine(state: database, events: reporter)
        var reports: [RunReport] = []
        await withTaskGroup(of: RunReport.self) { group in
            var pending = targets[...]
            func startNext() {
                guard let target = pending.popFirst() else { return }
                group.addTask { await runOne(target, engine: engine, stopper: stopper) }
            }
            for _ in 0..<max(1, parallelTargets) { startNext() }
            while let report = await group.next() {
                reports.append(report)
                startNext()
            }
        }
        return ExitStatus.combined(reports)
    }

    private func runOne(_ target: TargetConfig, engine: SyncEngine, stopper: SignalStopper) async -> RunReport {
        let report = await runLocked(target, engine: engine, stopper: stopper)
        // After the lock is let go, as in the daemon: the hook may take its time (or sync this target itself).
        // A stop (Ctrl-C, SIGTERM) skips the hook; the run's paths are kept for the next run's.
        if !target.onChange.isEmpty, report.reachesHook, !stopper.isStopped {
            await ChangeHook(command: target.onChange, target: target.name, timeLimit: target.onChangeTimeout, outputToStandardError: true)
                .runForPendingChanges(state: engine.state, report: report, logger: Self.hookLogger, stopped: { stopper.isStopped })
        }
        return report
    }

    /// Makes the source, takes the destination's lock and runs the target; the lock is let go on return.
    private func runLocked(_ target: TargetConfig, engine: SyncEngine, stopper: SignalStopper) async -> RunReport {
        // A run that ends before the engine starts it still took this long: the wait for another run's lock counts.
        let began = Date()
        let source: any Source
        do {
            source = try await SourceFactory.make(for: target)
        } catch {
            return await failedToStart(target, "\(error)", engine: engine, began: began)
        }
        let wait = waitForLock
        let reporter = self.reporter
        // A dry run writes nothing, so it needs no lock (and must not make the destination to hold one).
        let dryRun = options.dryRun, force = options.force, state = engine.state, sourceName = source.displayName
        // flock blocks: off the cooperative pool.
        let lock = await Blocking.run {
            Result { () throws(TargetLock.Failure) -> TargetLock? in
                if dryRun { return nil }
                return try TargetLock.acquire(target, wait: wait, waiting: { holder in
                    reporter.note("\(holder); waiting (use --no-wait to give up instead)", target: target.name)
                }, stopped: { stopper.isStopped }, remembered: { force ? 0 : (try? state.recordedEntryCount(from: sourceName, in: target.destination)) ?? 0 })
            }
        }
        switch lock {
        case .failure(.stopped): return failed(target, TargetLock.Failure.stopped.message, result: .interrupted, began: began)
        // Another run holds the folder (--no-wait): its run is what status should show, not this one's giving up.
        case .failure(.busy(let holder)): return failed(target, "\(holder); try again once it ends, or leave out --no-wait to wait for it", began: began)
        case .failure(.refused(let message)): return await failedToStart(target, message, engine: engine, began: began, refused: true)
        case .failure(let failure): return await failedToStart(target, failure.message, engine: engine, began: began)
        case .success(let held):
            let progress = TransferProgress()
            reporter.watch(target: target.name, progress: progress)
            let report: RunReport
            if stopper.register(progress) {
                // Why only now, with the lock held: a run that waits for the lock (or gives up on it) would hold a
                // log-in it may never use, idle for as long as the other run lasts.
                source.prepare()
                report = await engine.run(target, source: source, options: options, progress: progress)
            } else {
                report = failed(target, "stopped before it started", result: .interrupted, began: began)
            }
            // By hand only: the daemon would make and take away a folder that a media server may watch at every
            // interval while the source is down; by hand, one failed or refused run must not leave a new, empty
            // folder (on the disk beneath a drive that is not mounted, say).
            if let held, [.failed, .interrupted, .refused].contains(report.result) {
                await Blocking.run { held.removeDestinationIfUnused() }
            }
            withExtendedLifetime(held) {}
            return report
        }
    }

    /// Where a hook's failure is told: a line on standard error, as the daemon's log has it but for the time.
    private static let hookLogger = Logger(label: "folio") { _ in JournalLogHandler(level: .warning, timestamped: false) }

    /// A run that failed before the engine started it, recorded like any run (see `StateStore.recordFailedStart`),
    /// except in a dry run, which records nothing.
    private func failedToStart(_ target: TargetConfig, _ message: String, engine: SyncEngine, began: Date, refused: Bool = false) async -> RunReport {
        var report = RunReport(target: target.name)
        report.result = refused ? .refused : .failed
        report.error = message
        report.startedAt = began
        report.seconds = Date().timeIntervalSince(began)
        if !options.dryRun {
            let reporter = self.reporter, trigger = options.trigger
            await Blocking.run { [report] in
                do { try engine.state.recordFailedStart(target: target.name, trigger: trigger, at: report.startedAt, error: message, refused: refused) } catch {
                    reporter.note("cannot record the failed run for folio status: \(error)")
                }
            }
        }
        reporter.emit(.finished(report))
        return report
    }

    private func failed(_ target: TargetConfig, _ message: String, result: RunReport.Result = .failed, began: Date) -> RunReport {
        var report = RunReport(target: target.name)
        report.result = result
        report.error = message
        report.startedAt = began
        report.seconds = Date().timeIntervalSince(began)
        reporter.emit(.finished(report))
        return report
    }
}
