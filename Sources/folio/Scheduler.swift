import Dispatch
import FolioCore
import FolioState
import Foundation
import Glibc
import Logging
import ServiceLifecycle
import UnixSignals

/// `folio daemon`'s one service: runs each enabled automatic target on its schedule (`RunSchedule`), at most
/// `parallel-targets` at once, one run per target across processes (`TargetLock`), reloads the configuration on
/// SIGHUP, keeps systemd (READY, STATUS, WATCHDOG, STOPPING) and the state database (`folio status`) informed,
/// and on graceful shutdown cancels the runs in flight, which record themselves as interrupted.
///
/// Why an actor: the schedule (`slots`, `config`) is read and changed by the scheduling loop, by each run as it
/// ends, by the SIGHUP reload and by the heartbeat; the actor serialises them. Runs themselves are nonisolated
/// and never hold the actor while they work.
actor Scheduler: Service {
    private struct Slot {
        var target: TargetConfig
        /// Targets on one host share its connection cap: they run one at a time.
        var host: String?
        var due: Date
        var failures = 0
        var running = false
        /// Taken out of the configuration by a reload while it ran: kept until that run ends, so that the run
        /// still counts toward `parallel-targets` and its host's one run at a time, then forgotten.
        var removed = false
        /// Changed by a reload while it ran (another source, destination or exclude): the run under way mirrors
        /// the old settings, so the next one comes within seconds of its end, not an interval after.
        var changedWhileRunning = false
    }

    /// How a run attempt ended.
    private enum Outcome: Sendable {
        case ran(RunReport)
        /// Another process (a `folio sync --now`) holds the target's lock; the message names it.
        case busy(String)
    }

    private let configPath: String
    private let stateDirectory: String
    private let database: StateDatabase
    private let engine: SyncEngine
    private let reporter: LogReporter
    private let notifier: SystemdNotifier?
    private let pid = getpid()
    /// Why a serial queue: the schedule and progress rows for `folio status` are SQLite writes (blocking, maybe
    /// waiting on a manual run's transaction), which must stay off the cooperative pool and land in order.
    private let statusQueue = DispatchQueue(label: "folio.daemon.status")
    private var config: Config
    private var slots: [String: Slot] = [:]

    /// How long a stop may wait for the runs in flight before the process exits anyway.
    private static let stopLimitSeconds = 9

    /// Progress lines in the log, at most this often per running target.
    private static let progressLogEvery: Duration = .seconds(15)
    /// A target whose lock another process holds is tried again this soon (or at its interval, if shorter).
    private static let busyRetrySeconds = 10.0

    init(config: Config, configPath: String, stateDirectory: String, database: StateDatabase, reporter: LogReporter, notifier: SystemdNotifier?) {
        self.config = config
        self.configPath = configPath
        self.stateDirectory = stateDirectory
        self.database = database
        self.reporter = reporter
        self.notifier = notifier
        engine = SyncEngine(state: database, events: reporter)
    }

    func run() async throws {
        // Trap SIGHUP before READY=1: a reload sent as soon as systemd sees us up must not kill the process.
        let hangups = await UnixSignalsSequence(trapping: .sighup)
        let database = self.database
        let lastRuns = await Blocking.run { (try? database.lastRuns()) ?? [:] }
        schedule(config, lastRuns: lastRuns)
        let logger = reporter.logger
        logger.notice("folio daemon started: \(CountText.of(slots.count, "automatic target")) from \(configPath), state in \(stateDirectory)")
        if slots.isEmpty {
            logger.warning("no enabled target in \(configPath) has mode automatic or both; nothing will run until a reload brings one")
        }
        notifier?.send("READY=1\nSTATUS=\(statusLine())")
        let notifier = self.notifier, reporter = self.reporter
        await withGracefulShutdownHandler {
            await cancelWhenGracefulShutdown { await self.loop(hangups) }
        } onGracefulShutdown: {
            notifier?.send("STOPPING=1\nSTATUS=stopping: cancelling the transfers in flight")
            reporter.logger.notice("stopping: cancelling the transfers in flight; partial files are kept for the next run")
            // The promise is an exit within 10 s. Transfers stop between chunks in well under that, but a step
            // that does not check for cancellation (a huge listing, a state database locked by another process)
            // could hold the stop; past the limit the process ends anyway. Nothing is lost: partial files stay,
            // the state database is consistent at every commit, and the next run closes the runs left 'running'
            // as interrupted.
            DispatchQueue.global().asyncAfter(deadline: .now() + .seconds(Self.stopLimitSeconds)) {
                reporter.logger.error("stopping: the runs in flight did not end within \(Self.stopLimitSeconds) s; exiting now (partial files stay, the next run records these runs as interrupted)")
                _exit(0)
            }
        }
        // On the status queue, after the writes the ended runs queued: a stopped daemon leaves no schedule behind.
        await withCheckedContinuation { continuation in
            statusQueue.async {
                try? database.forgetSchedules(keeping: [])
                continuation.resume()
            }
        }
        reporter.logger.notice("folio daemon stopped (pid \(pid))")
    }

    /// The scheduling loop, with the reload watcher and the heartbeat beside it; returns once cancelled (graceful
    /// shutdown) and every run it started has ended.
    private func loop(_ hangups: UnixSignalsSequence) async {
        await withDiscardingTaskGroup { group in
            group.addTask {
                for await _ in hangups { await self.reload() }
            }
            group.addTask { await self.heartbeat() }
            while !Task.isCancelled {
                for target in takeDue() {
                    group.addTask { await self.runOne(target) }
                }
                // Why polling: a quarter second is far below any interval (1 s at least) and keeps one simple
                // loop; runs ending and reloads take effect at the next tick.
                try? await Task.sleep(for: .milliseconds(250))
            }
        }
    }

    // MARK: schedule

    /// The targets the daemon runs.
    private static func automatic(_ config: Config) -> [TargetConfig] {
        config.targets.filter { $0.enabled && $0.mode.includes(.automatic) }
    }

    /// The first schedule: `interval` after each target's last good run; at once (with a little jitter) for a
    /// target that never ran or whose last run did not succeed.
    private func schedule(_ config: Config, lastRuns: [String: StateDatabase.RunRow]) {
        let now = Date()
        for target in Self.automatic(config) {
            var due = now.addingTimeInterval(Self.startupJitter(target))
            if let run = lastRuns[target.name], let ended = run.endedAt, run.result == "synced" || run.result == "unchanged" {
                let planned = ended.addingTimeInterval(RunSchedule.delay(interval: target.interval, consecutiveFailures: 0, random: .random(in: 0..<1)))
                // A clock set back must not postpone a target by more than one interval.
                due = max(due, min(planned, now.addingTimeInterval(Double(target.interval))))
            }
            slots[target.name] = Slot(target: target, host: RunSchedule.host(of: target.source), due: due)
        }
        let database = self.database, pid = self.pid
        let nextRuns = slots.mapValues(\.due)
        statusQueue.async { [reporter] in
            do { try database.resetSchedule(daemonPID: pid, nextRuns: nextRuns) } catch { reporter.logger.warning("cannot record the schedule for folio status: \(error)") }
        }
    }

    /// Up to a tenth of the interval, at most 10 s: targets (and machines) started together do not all connect at once.
    private static func startupJitter(_ target: TargetConfig) -> Double {
        Double.random(in: 0...min(RunSchedule.jitterLimit(interval: target.interval), 10))
    }

    /// Marks the targets to start now as running and returns them.
    private func takeDue() -> [TargetConfig] {
        let now = Date()
        for (name, slot) in slots where !slot.running {
            let due = RunSchedule.clamped(slot.due, now: now, interval: slot.target.interval)
            if due != slot.due {
                slots[name]?.due = due
                recordNextRun(name, due)
            }
        }
        let running = slots.values.filter(\.running)
        let candidates = slots.values.filter { !$0.running }.map { RunSchedule.Candidate(name: $0.target.name, host: $0.host, due: $0.due) }
        let names = RunSchedule.startable(candidates, now: now, busyHosts: Set(running.compactMap(\.host)),
                                          slots: config.parallelTargets - running.count)
        for name in names {
            slots[name]?.running = true
            recordNextRun(name, nil)
        }
        return names.compactMap { slots[$0]?.target }
    }

    /// Reschedules a target after a run attempt: `interval` after a good run, backoff after a failure.
    private func finished(_ name: String, _ outcome: Outcome) {
        guard var slot = slots[name] else { return }
        guard !slot.removed else {
            slots[name] = nil
            return
        }
        slot.running = false
        let interval = slot.target.interval
        var delay: Double
        switch outcome {
        case .busy(let holder):
            delay = min(Self.busyRetrySeconds, Double(interval))
            reporter.logger.notice("\(name): not started: \(holder); trying again in \(DurationText.describe(seconds: Int(delay.rounded(.up))))")
        case .ran(let report) where report.result == .failed:
            slot.failures += 1
            // Why no quick retries after a refusal: the same refusal (a password, key, host key or certificate)
            // comes back until someone fixes it, and a server that counts failed log-ins (fail2ban, an account
            // lock-out) would ban this machine after a few tries 10, 20 and 40 s apart.
            let refused = report.errorCode?.isRetryable == false
            delay = RunSchedule.delay(interval: interval, consecutiveFailures: refused ? 0 : slot.failures, random: .random(in: 0..<1))
            let wait = DurationText.describe(seconds: Int(delay.rounded(.up)))
            reporter.logger.notice(refused
                ? "\(name): not trying again before its next run, in \(wait): the same refusal would come back; fix it, then reload the daemon or run folio sync --now \(name) to try at once"
                : "\(name): trying again in \(wait) (failure \(slot.failures) in a row)")
        case .ran:
            slot.failures = 0
            delay = RunSchedule.delay(interval: interval, consecutiveFailures: 0, random: .random(in: 0..<1))
        }
        if slot.changedWhileRunning { delay = min(delay, Self.startupJitter(slot.target)) }
        slot.changedWhileRunning = false
        slot.due = Date().addingTimeInterval(delay)
        slots[name] = slot
        recordNextRun(name, slot.due)
    }

    private func recordNextRun(_ name: String, _ date: Date?) {
        let database = self.database, pid = self.pid
        statusQueue.async { [reporter] in
            do { try database.setNextRun(target: name, daemonPID: pid, at: date) } catch { reporter.logger.warning("cannot record the schedule for folio status: \(error)") }
        }
    }

    // MARK: runs

    /// One run attempt of one target, its hook, then its rescheduling. Runs off the actor: the schedule stays
    /// responsive while targets sync.
    private nonisolated func runOne(_ target: TargetConfig) async {
        let outcome = await attempt(target)
        if case .ran(let report) = outcome {
            let database = self.database, pid = self.pid
            statusQueue.async { try? database.setProgress(target: target.name, daemonPID: pid, nil) }
            // A shutdown skips the hook (systemd is stopping the service); the run's paths are kept for the next run's.
            if !target.onChange.isEmpty, report.reachesHook, !Task.isCancelled {
                await ChangeHook(command: target.onChange, target: target.name, timeLimit: target.onChangeTimeout)
                    .runForPendingChanges(state: engine.state, report: report, logger: reporter.logger, stopped: { Task.isCancelled })
            }
        }
        await finished(target.name, outcome)
    }

    /// Takes the target's lock (never waiting for it) and runs the target.
    private nonisolated func attempt(_ target: TargetConfig) async -> Outcome {
        let source: any Source
        do {
            source = try await SourceFactory.make(for: target)
        } catch {
            return .ran(await failedToStart(target, "\(error)", code: (error as? SourceError)?.code))
        }
        // open and flock: off the cooperative pool. Never waits: a busy target is retried later.
        let state = engine.state, sourceName = source.displayName
        let lock = await Blocking.run {
            Result { () throws(TargetLock.Failure) -> TargetLock in
                try TargetLock.acquire(target, wait: false, waiting: { _ in }, remembered: { (try? state.recordedEntryCount(from: sourceName, in: target.destination)) ?? 0 })
            }
        }
        switch lock {
        case .failure(.busy(let holder)):
            return .busy(holder)
        case .failure(.refused(let message)):
            return .ran(await failedToStart(target, message, refused: true))
        case .failure(let failure):
            return .ran(await failedToStart(target, failure.message))
        case .success(let held):
            let progress = TransferProgress()
            reporter.watch(target: target.name, progress: progress)
            // Why only now, with the lock held, where a run by hand starts it while its state database opens
            // (`RunCoordinator`): the daemon's database is open already, so there is nothing to overlap, and a busy
            // target is retried later, so a log-in started for it would only be ended unused.
            source.prepare()
            let report = await engine.run(target, source: source, options: SyncEngine.RunOptions(trigger: .automatic), progress: progress)
            // A run that did not bring the destination in step takes away the `.folio` its lock made, as a run by
            // hand does: left in the empty mountpoint of a drive that is not mounted, it sat on the disk beneath
            // while the log said nothing was changed. Unlike a run by hand, the destination itself stays if the
            // lock made it: a folder a media server watches would otherwise come and go at every interval while
            // the source is down.
            if [.failed, .interrupted, .refused].contains(report.result) {
                await Blocking.run { held.removeDestinationIfUnused(keepingDestination: true) }
            }
            // The lock covers the run only; it is released here, before the hook, which may take its time.
            withExtendedLifetime(held) {}
            return .ran(report)
        }
    }

    private nonisolated func failedToStart(_ target: TargetConfig, _ message: String, code: SourceError.Code? = nil, refused: Bool = false) async -> RunReport {
        var report = RunReport(target: target.name)
        report.result = refused ? .refused : .failed
        report.error = message
        report.errorCode = code
        reporter.emit(.started(target: target.name, source: target.source, destination: target.destination, trigger: .automatic))
        let engine = self.engine, reporter = self.reporter
        await Blocking.run { [report] in
            do { try engine.state.recordFailedStart(target: target.name, trigger: .automatic, at: report.startedAt, error: message, refused: refused) } catch {
                reporter.logger.warning("cannot record the failed run for folio status: \(error)")
            }
        }
        reporter.emit(.finished(report))
        return report
    }

    // MARK: reload

    /// SIGHUP: reads the configuration again; an invalid one is logged and the running one kept.
    private func reload() async {
        notifier?.send("RELOADING=1")
        let path = configPath
        let loaded = await Blocking.run {
            Result { () throws(ConfigError) -> Config in
                // A configuration handed over in a pipe (`--config <(…)`) was read at start; read again it is
                // empty, and every target would be dropped.
                var info = stat()
                if stat(path, &info) == 0, (info.st_mode & S_IFMT) != S_IFREG {
                    throw ConfigError(file: path, line: nil, message: "not a regular file (a pipe is read once); restart the daemon to change its configuration")
                }
                return try Config.loadForRunning(path: path)
            }
        }
        switch loaded {
        case .failure(let error):
            reporter.logger.error("reload failed, keeping the previous configuration: \(error)")
        case .success(let new):
            for warning in new.warnings { reporter.logger.warning("\(warning)") }
            apply(new)
            reporter.logger.notice("reloaded \(path): \(CountText.of(slots.values.filter { !$0.removed }.count, "automatic target"))")
        }
        notifier?.send("READY=1\nSTATUS=\(statusLine())")
    }

    private func apply(_ new: Config) {
        if let level = Logger.Level(rawValue: new.logLevel) { reporter.logger.logLevel = level }
        if new.stateDirectory != config.stateDirectory {
            // Where FOLIO_STATE_DIR is set it wins over state-dir, so a restart would change nothing either.
            if let override = ProcessInfo.processInfo.environment["FOLIO_STATE_DIR"], !override.isEmpty {
                reporter.logger.warning("state-dir changed in \(configPath); FOLIO_STATE_DIR in the daemon's environment sets the state directory, so state-dir has no effect")
            } else {
                reporter.logger.warning("state-dir changed in \(configPath); it takes effect when the daemon restarts")
            }
        }
        config = new
        let now = Date()
        let wanted = Self.automatic(new)
        let names = Set(wanted.map(\.name))
        for (name, slot) in slots where !names.contains(name) {
            if slot.running { slots[name]?.removed = true } else { slots[name] = nil }
        }
        for target in wanted {
            if var slot = slots[target.name] {
                // A shorter interval takes effect now; a longer one after the next run.
                if target.interval < slot.target.interval {
                    slot.due = min(slot.due, now.addingTimeInterval(RunSchedule.delay(interval: target.interval, consecutiveFailures: 0, random: .random(in: 0..<1))))
                }
                // A target whose last run failed runs again within seconds, as after a restart: a reload is how
                // the fix of a refusal (a password, a trusted host key) is applied, and it waits for no interval.
                // So does a target that now mirrors another source or into another folder, or excludes other
                // entries: until it runs, its destination is not what the configuration says.
                let mirrorsOtherwise = target.source != slot.target.source || target.destination != slot.target.destination
                    || target.exclude != slot.target.exclude || target.symlinks != slot.target.symlinks
                if mirrorsOtherwise && slot.running { slot.changedWhileRunning = true }
                if slot.failures > 0 || mirrorsOtherwise {
                    slot.due = min(slot.due, now.addingTimeInterval(Self.startupJitter(target)))
                }
                slot.target = target
                slot.host = RunSchedule.host(of: target.source)
                slot.removed = false
                slots[target.name] = slot
            } else {
                slots[target.name] = Slot(target: target, host: RunSchedule.host(of: target.source), due: now.addingTimeInterval(Self.startupJitter(target)))
            }
            if slots[target.name]?.running == false { recordNextRun(target.name, slots[target.name]?.due) }
        }
        let database = self.database
        statusQueue.async { try? database.forgetSchedules(keeping: names) }
    }

    // MARK: heartbeat

    /// Every second (or faster, for a short watchdog): WATCHDOG=1 when due, STATUS= when it changed, progress rows
    /// for `folio status`, and now and then a progress line in the log.
    private func heartbeat() async {
        let clock = ContinuousClock()
        var tick: Duration = .seconds(1)
        if let watchdog = notifier?.watchdogInterval { tick = min(tick, watchdog / 4) }
        var lastWatchdog = clock.now
        var lastProgressLog = clock.now
        var lastStatus = ""
        while !Task.isCancelled {
            try? await Task.sleep(for: tick)
            let now = clock.now
            if let watchdog = notifier?.watchdogInterval, now - lastWatchdog >= watchdog / 2 {
                notifier?.send("WATCHDOG=1")
                lastWatchdog = now
            }
            let line = statusLine()
            if line != lastStatus {
                notifier?.send("STATUS=\(line)")
                lastStatus = line
            }
            let running = reporter.running()
            let database = self.database, pid = self.pid
            statusQueue.async {
                for run in running {
                    let progress = StateDatabase.ScheduleRow.Progress(filesDone: run.filesDone, filesTotal: run.filesTotal,
                                                                      bytesDone: run.bytesDone, bytesTotal: run.bytesTotal)
                    try? database.setProgress(target: run.target, daemonPID: pid, progress)
                }
            }
            if now - lastProgressLog >= Self.progressLogEvery {
                reporter.logProgress()
                lastProgressLog = now
            }
        }
    }

    /// "syncing photos: 1,204/5,000 files, 38.0 MiB/s; next: videos in 4m", or "idle; next: …".
    private func statusLine() -> String {
        guard !slots.isEmpty else { return "idle: no automatic targets in \(configPath)" }
        let progress = Dictionary(uniqueKeysWithValues: reporter.running().map { ($0.target, $0) })
        let running = slots.values.filter(\.running).map(\.target.name).sorted()
        var line: String
        if running.isEmpty {
            line = "idle"
        } else {
            line = "syncing " + running.map { name in
                guard let run = progress[name] else { return "\(name): checking" }
                return "\(name): \(Self.grouped(run.filesDone))/\(Self.grouped(run.filesTotal)) files, \(ByteCount.rate(run.rate))"
            }.joined(separator: ", ")
        }
        if let next = slots.values.filter({ !$0.running }).min(by: { $0.due < $1.due }) {
            let seconds = Int(next.due.timeIntervalSinceNow.rounded(.up))
            line += "; next: \(next.target.name) " + (seconds <= 0 ? "now" : "in \(DurationText.describe(seconds: seconds))")
        }
        return line
    }

    /// 1204 → "1,204".
    private static func grouped(_ number: Int) -> String {
        let digits = Array(String(number))
        var out = ""
        for (index, digit) in digits.enumerated() {
            if index > 0 && (digits.count - index) % 3 == 0 { out.append(",") }
            out.append(digit)
        }
        return out
    }
}
