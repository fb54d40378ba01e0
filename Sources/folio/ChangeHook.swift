import CFolioSys
import Dispatch
import FolioCore
import Foundation
import Glibc
import Logging

/// A target's `on-change` command, run once after a run that changed something (or after any run while an earlier
/// run's paths wait for it, see `runForPendingChanges`), with the changed paths on its standard input (one per
/// line: names cannot hold control characters, see `RelativePath`). Its failure is logged and never retried: the
/// next run that changes something runs it again.
struct ChangeHook: Sendable {
    /// The command as configured, `{target}` still in it.
    let command: [String]
    let target: String
    /// Seconds the command may run before it is stopped (`on-change-timeout`).
    let timeLimit: Int
    /// Whether the command's standard output goes to standard error: after `folio sync --now`, whose standard
    /// output is Folio's own (the summary, or `--json`'s NDJSON, which a line from the hook would break). The
    /// daemon's both go to the journal.
    var outputToStandardError = false

    /// The argument vector with `{target}` replaced by the target's name.
    var arguments: [String] { command.map { $0.replacingOccurrences(of: "{target}", with: target) } }

    /// Runs the command for the changes of `report`'s run and those earlier runs kept when their hook did not
    /// run (a run stopped by SIGTERM or Ctrl-C, a process that ended first; `HookBacklog`), each path once, then
    /// forgets them. Forgotten whatever the hook's exit, as a failed hook is not retried; kept when it failed
    /// while `stopped` says Folio itself was being stopped (its stop cut the hook short), for the next run's
    /// hook. This run's paths come from the report, not the state database: the run's end may not have been
    /// recorded, and its list may be long.
    func runForPendingChanges(state: any StateStore, report: RunReport, logger: Logger, stopped: @Sendable () -> Bool) async {
        let target = self.target, run = report.runID
        var earlier = HookBacklog(runs: [], paths: [])
        do {
            earlier = try await Blocking.run { try state.pendingHookChanges(of: target, before: run) }
        } catch {
            logger.warning("\(target): cannot read the changes kept for the on-change hook: \(error); it gets this run's only")
        }
        var paths = earlier.paths
        if paths.isEmpty {
            paths = report.changedPaths
        } else {
            let seen = Set(paths)
            paths += report.changedPaths.filter { !seen.contains($0) }
        }
        guard !paths.isEmpty else { return }
        let ending = await self.run(changedPaths: paths, logger: logger)
        // A hook cut short by a stop (SIGTERM from a stopping daemon or from `sync --now` on Ctrl-C, or a stop
        // signal sent to the hook itself) gets its paths again after the next run; a hook that failed on its own,
        // or ran out of time, does not. Why by the hook's signal as well as `stopped`: a signal sent to the hook
        // may end it before Folio has seen a stop.
        guard ending == .succeeded || (ending == .failed && !stopped()) else { return }
        var done = earlier
        if let run { done.runs.append(run) }
        await Blocking.run { [done] in
            do { try state.forgetHookChanges(done) } catch {
                logger.warning("\(target): cannot forget the changes the on-change hook has had: \(error); it may get them again")
            }
        }
    }

    /// How a hook ended.
    enum Ending: Equatable {
        /// Exit status 0.
        case succeeded
        /// Killed by SIGINT, SIGTERM, SIGHUP or SIGQUIT that its time limit did not send: a stop (Ctrl-C, a
        /// stopping daemon, a shutdown).
        case interrupted
        /// Anything else: it could not start, exited non-zero, or was stopped past its time limit.
        case failed
    }

    /// Runs the command and waits for it; cancelling the task sends it SIGTERM.
    func run(changedPaths: [RelativePath], logger: Logger) async -> Ending {
        let arguments = self.arguments
        let input = changedPaths.flatMap { $0.bytes + [UInt8(ascii: "\n")] }
        let pid: pid_t
        let stdinWriter: Int32
        switch Self.spawn(arguments, outputToStandardError: outputToStandardError) {
        case .failure(let message):
            logger.warning("\(target): on-change hook \(arguments[0]) could not start: \(message); fix the command in on-change (it is not retried; the next change runs it again)")
            return .failed
        case .success(let started):
            (pid, stdinWriter) = started
        }
        // Why a lock and a flag: a pid may be signalled only until it is reaped (then the kernel may give it to
        // another process). The waiter reaps under the lock after setting `reaped`; signals are sent under the
        // same lock only while it is false.
        let reaped = Locked(false)
        // Set when the run is being stopped: the paths then wait for no reader once the hook has ended.
        let stopping = Locked(false)
        // A hook past its time: SIGTERM, then SIGKILL if it lingers. Why: the target's next run waits for it.
        let target = self.target, limit = timeLimit
        let timedOut = Locked(false)
        DispatchQueue.global().asyncAfter(deadline: .now() + .seconds(limit)) {
            let running = reaped.withLock { !$0 }
            guard running else { return }
            timedOut.withLock { $0 = true }
            logger.warning("\(target): on-change hook \(arguments[0]) still running after \(DurationText.describe(seconds: limit)) (on-change-timeout); stopping it")
            Self.signal(pid, SIGTERM, unless: reaped)
            DispatchQueue.global().asyncAfter(deadline: .now() + .seconds(Self.killAfterSeconds)) {
                Self.signal(pid, SIGKILL, unless: reaped)
            }
        }
        let (status, unwritten): (Int32, Int?) = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                // Writing to a pipe and waiting for a child block: on a dispatch thread, never on the cooperative pool.
                DispatchQueue.global().async {
                    let unwritten = Self.feed(input, to: stdinWriter, whileRunning: pid, stopping: stopping)
                    close(stdinWriter)
                    var info = siginfo_t()
                    // Wait for the exit without reaping: the zombie keeps the pid reserved until the lock below.
                    while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) < 0 && errno == EINTR {}
                    let status = reaped.withLock { reaped in
                        reaped = true
                        var status: Int32 = 0
                        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
                        return status
                    }
                    continuation.resume(returning: (status, unwritten))
                }
            }
        } onCancel: {
            // The daemon is stopping and must not leave a child behind: SIGTERM now, SIGKILL if it lingers, so the
            // stop stays within its 10 s.
            stopping.withLock { $0 = true }
            Self.signal(pid, SIGTERM, unless: reaped)
            DispatchQueue.global().asyncAfter(deadline: .now() + .seconds(Self.killAfterSeconds)) {
                Self.signal(pid, SIGKILL, unless: reaped)
            }
        }
        if let unwritten {
            logger.warning("\(target): on-change hook \(arguments[0]) ended, and what it left running held its input unread for \(Self.unreadInputPatience); \(unwritten) of \(changedPaths.count) paths were not written to it")
        }
        let exited = status & 0x7f == 0
        let how = exited ? "exited with status \((status >> 8) & 0xff)" : "was killed by signal \(status & 0x7f)"
        if exited && (status >> 8) & 0xff == 0 {
            logger.info("\(target): on-change hook \(arguments[0]) ran for \(CountText.of(changedPaths.count, "changed path"))")
            return .succeeded
        }
        // A stop cut it short: Folio's own (a hook that is a shell script exits 143 on the SIGTERM rather than
        // dying of it), or a stop signal sent to the hook itself. Its paths go to the next run's hook.
        let stopSignal = !exited && [SIGINT, SIGTERM, SIGHUP, SIGQUIT].contains(status & 0x7f)
        if !timedOut.withLock({ $0 }), stopping.withLock({ $0 }) || stopSignal {
            logger.warning("\(target): on-change hook \(arguments[0]) was stopped (it \(how)); the next run's hook gets its paths again")
            return .interrupted
        }
        logger.warning("\(target): on-change hook \(arguments[0]) \(how); it is not retried (the next change runs it again)")
        return .failed
    }

    /// Writes the paths to the hook's standard input. Why not one blocking write: a hook that ends while
    /// something it started holds that input without reading it (`some-daemon &`) would leave the write blocked
    /// for good once the pipe is full (64 KiB), and with it the target's next run, which waits for the hook. So
    /// the write gives up, and returns how many paths it did not write, once the hook has ended and nothing has
    /// read for `unreadInputPatience`, or at once when `stopping`; a reader that is slow but reads gets every path.
    /// A reader that closes the pipe (EPIPE: a hook that does not want the list) ends it too, and returns nil like
    /// a complete write.
    private static func feed(_ bytes: [UInt8], to fd: Int32, whileRunning pid: pid_t, stopping: Locked<Bool>) -> Int? {
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        return bytes.withUnsafeBytes { buffer -> Int? in
            var offset = 0
            // Since when the hook has been seen ended with nothing read (nil while it runs, or since a read), and
            // how many bytes then waited in the pipe. Why that count: a full pipe takes a write only once a whole
            // page (4 KiB) is free, so a reader that reads a line at a time shows its progress there first.
            var stalledSince: ContinuousClock.Instant?
            var waiting = Int32.max
            while offset < buffer.count {
                let written = write(fd, buffer.baseAddress! + offset, buffer.count - offset)
                if written >= 0 {
                    offset += written
                    stalledSince = nil
                } else if errno == EAGAIN {
                    // Full: wait for the reader, looking every 100 ms whether the hook is still there. Why it may
                    // go on past the hook's end: what the hook started may be reading.
                    var ready = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                    guard poll(&ready, 1, 100) <= 0, folio_child_has_ended(pid) != 0 else { continue }
                    let unwritten = { buffer[offset...].reduce(0) { $0 + ($1 == UInt8(ascii: "\n") ? 1 : 0) } }
                    if stopping.withLock({ $0 }) { return unwritten() }
                    let now = ContinuousClock.now, nowWaiting = folio_unread_bytes(fd)
                    if nowWaiting < waiting { stalledSince = now }
                    waiting = nowWaiting
                    if let since = stalledSince, now - since >= unreadInputPatience { return unwritten() }
                    stalledSince = stalledSince ?? now
                } else if errno != EINTR {
                    return nil
                }
            }
            return nil
        }
    }

    /// How long the paths wait for a reader once the hook has ended (see `feed`).
    private static let unreadInputPatience = Duration.seconds(5)

    /// How long a hook may take to end after SIGTERM when the daemon stops.
    private static let killAfterSeconds = 4

    /// Signals the hook's process group: the hook and what it started (a script's commands, what they left
    /// running), which the hook's own end left behind. Why only while the hook is not reaped: its group's id is
    /// its pid, which the kernel may give to another process after.
    private static func signal(_ pid: pid_t, _ number: Int32, unless reaped: Locked<Bool>) {
        reaped.withLock { reaped in
            if !reaped { kill(-pid, number) }
        }
    }

    private enum Spawned {
        case success((pid_t, Int32))
        case failure(String)
    }

    /// Starts the command with a pipe on its standard input; its output goes where the daemon's goes (the journal).
    /// Why no lock around pipe and spawn, although Glibc's module does not export pipe2 (the pipe is made
    /// close-on-exec in a second step): a hook starts with every descriptor past standard error closed, so one
    /// spawned at the same moment cannot inherit another's write end (and that hook never see its input end).
    private static func spawn(_ arguments: [String], outputToStandardError: Bool) -> Spawned {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { return .failure(String(cString: strerror(errno))) }
        _ = fcntl(fds[0], F_SETFD, FD_CLOEXEC)
        _ = fcntl(fds[1], F_SETFD, FD_CLOEXEC)
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        // dup2 clears O_CLOEXEC on the child's stdin; both pipe ends are otherwise closed at exec.
        posix_spawn_file_actions_adddup2(&actions, fds[0], STDIN_FILENO)
        if outputToStandardError { posix_spawn_file_actions_adddup2(&actions, STDERR_FILENO, STDOUT_FILENO) }
        // Only standard input, output and error: a descriptor Folio inherited open (its starter's socket, say)
        // would otherwise pass to the hook and to whatever the hook leaves running, and be held open by them.
        let closing = folio_spawn_close_from(&actions, 3)
        guard closing == 0 else {
            close(fds[0])
            close(fds[1])
            return .failure(String(cString: strerror(closing)))
        }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // Folio ignores SIGPIPE, and the daemon takes SIGTERM, SIGINT and SIGHUP through dispatch sources with them
        // ignored and blocked on its threads: the hook gets default dispositions and an empty mask, or it (and
        // what it starts) would sit out on-change-timeout's SIGTERM and `systemctl stop` until the SIGKILL.
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGPIPE, SIGTERM, SIGINT, SIGHUP] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        var unblocked = sigset_t()
        sigemptyset(&unblocked)
        posix_spawnattr_setsigmask(&attributes, &unblocked)
        // A process group of its own, which `signal` stops whole.
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP))
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) }
        argv.append(nil)
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, argv[0]!, &actions, &attributes, argv, environ)
        close(fds[0])
        guard result == 0 else {
            close(fds[1])
            return .failure(String(cString: strerror(result)))
        }
        return .success((pid, fds[1]))
    }
}
