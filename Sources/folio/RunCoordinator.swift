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
        async let opening = Blocking.run { Result { () throws(StateError) in try StateDatabase(directory: directory) } }
        // Why while the state database opens: opening it takes milliseconds (making it, on a first run: its
        // tables and a flush) in which the first targets' SSH log-ins, six round trips or more, are on their
        // way (`Source.prepare`). The lock is taken later, once the database can tell a drive that is not mounted.
        let ahead = await Self.makeSources(for: targets.prefix(max(1, parallelTargets)))
        let database: StateDatabase
        switch await opening {
        case .success(let opened):
            database = opened
        case .failure(let error):
            for case .success(let source) in ahead { await source.finishRun() }
            FileDescriptorOutput.writeToStandardError("folio: \(error.message)\n")
            return .runFailed
        }
        let engine = SyncEngine(state: database, events: reporter)
        var reports: [RunReport] = []
        await withTaskGroup(of: RunReport.self) { group in
            var pending = targets.indices[...]
            func startNext() {
                guard let index = pending.popFirst() else { return }
                let target = targets[index], made = index < ahead.count ? ahead[index] : nil
                group.addTask { await runOne(target, made: made, engine: engine, stopper: stopper) }
            }
            for _ in 0..<max(1, parallelTargets) { startNext() }
            while let report = await group.next() {
                reports.append(report)
                startNext()
            }
        }
        return ExitStatus.combined(reports)
    }

    /// Makes the sources of the targets that run first, and starts what their listings will wait for.
    private static func makeSources(for targets: ArraySlice<TargetConfig>) async -> [Result<any Source, any Error>] {
        var sources: [Result<any Source, any Error>] = []
        for target in targets {
            do {
                let source = try await SourceFactory.make(for: target)
                source.prepare()
                sources.append(.success(source))
            } catch {
                sources.append(.failure(error))
            }
        }
        return sources
    }

    private func runOne(_ target: TargetConfig, made: Result<any Source, any Error>?, engine: SyncEngine, stopper: SignalStopper) async -> RunReport {
        let report = await runLocked(target, made: made, engine: engine, stopper: stopper)
        // After the lock is let go, as in the daemon: the hook may take its time (or sync this target itself).
        // A stop (Ctrl-C, SIGTERM) skips the hook; the run's paths are kept for the next run's.
        if !target.onChange.isEmpty, report.reachesHook, !stopper.isStopped {
            await ChangeHook(command: target.onChange, target: target.name, timeLimit: target.onChangeTimeout, outputToStandardError: true)
                .runForPendingChanges(state: engine.state, report: report, logger: Self.hookLogger, stopped: { stopper.isStopped })
        }
        return report
    }

    /// Takes the destination's lock and runs the target with its source (`made` ahead, else made here); the lock
    /// is let go on return. A source made ahead may be logging in already: every way out before the run ends that.
    private func runLocked(_ target: TargetConfig, made: Result<any Source, any Error>?, engine: SyncEngine, stopper: SignalStopper) async -> RunReport {
        // A run that ends before the engine starts it still took this long: the wait for another run's lock counts.
        let began = Date()
        let source: any Source
        do {
            if let made {
                source = try made.get()
            } else {
                source = try await SourceFactory.make(for: target)
            }
        } catch {
            return await failedToStart(target, "\(error)", engine: engine, began: began)
        }
        let reporter = self.reporter
        // A dry run writes nothing, so it needs no lock (and must not make the destination to hold one).
        let dryRun = options.dryRun, force = options.force, state = engine.state, sourceName = source.displayName
        func acquire(wait: Bool) async -> Result<TargetLock?, TargetLock.Failure> {
            // flock blocks: off the cooperative pool.
            await Blocking.run {
                Result { () throws(TargetLock.Failure) -> TargetLock? in
                    if dryRun { return nil }
                    return try TargetLock.acquire(target, wait: wait, waiting: { holder in
                        reporter.note("\(holder); waiting (use --no-wait to give up instead)", target: target.name)
                    }, stopped: { stopper.isStopped }, remembered: { force ? 0 : (try? state.recordedEntryCount(from: sourceName, in: target.destination)) ?? 0 })
                }
            }
        }
        var lock = await acquire(wait: false)
        if case .failure(.busy) = lock, waitForLock {
            // Why end the log-in started ahead: it would sit unused, holding a connection to the server, for as
            // long as the other run lasts. `prepare` below starts another once the lock is ours.
            await source.finishRun()
            lock = await acquire(wait: true)
        }
        if case .failure = lock { await source.finishRun() }
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
                // Nothing if the log-in started ahead is still on its way; a source made after the state database
                // opened, or one whose log-in ended while the lock was busy, starts it now.
                source.prepare()
                report = await engine.run(target, source: source, options: options, progress: progress)
            } else {
                await source.finishRun()
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
