import ArgumentParser
import FolioCore
import FolioState
import Foundation
import Glibc
import Logging
import ServiceLifecycle

/// `folio daemon`: the service systemd runs (`Type=notify`). Syncs every enabled automatic target on its schedule
/// until SIGTERM or SIGINT, reloads the configuration on SIGHUP, logs to standard error for journald.
struct DaemonCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "daemon",
        abstract: "Sync automatic targets on their schedule until stopped (the systemd service).",
        discussion: """
            Runs each enabled target whose mode is automatic or both every `interval` (from the end of its last run). \
            SIGHUP reloads the configuration (an invalid one is logged and the old one kept); SIGTERM and SIGINT cancel \
            the transfers in flight (partial files stay for the next run) and exit 0. Logs go to standard error.
            """
    )

    @Option(name: .long, help: "Configuration file (default: $FOLIO_CONFIG, else /etc/folio/folio.toml).")
    var config: String?

    func run() async throws {
        let path = Config.location(explicit: config)
        let loaded: Config
        do {
            // Reads files and resolves the destinations' real paths (a hung network mount): off the cooperative pool.
            loaded = try await Blocking.run { () throws(ConfigError) -> Config in try Config.loadForRunning(path: path) }
        } catch {
            // Exit 2 (not ArgumentParser's 1): folio.service has RestartPreventExitStatus=2, so systemd does not
            // restart a daemon in a loop over a configuration only a person can fix.
            FileDescriptorOutput.writeToStandardError("folio: \(error.description)\n")
            throw ExitStatus.usage.exitCode
        }
        // Read the notify socket, then hide it from children (on-change hooks must not talk to systemd for us),
        // as sd_notify's unset_environment does. Done before any task runs, while nothing else reads the environment.
        let notifier = SystemdNotifier()
        unsetenv("NOTIFY_SOCKET")
        unsetenv("WATCHDOG_USEC")
        unsetenv("WATCHDOG_PID")

        let level = Logger.Level(rawValue: loaded.logLevel) ?? .info
        let logger = Logger(label: "folio") { _ in JournalLogHandler(level: level) }
        for warning in loaded.warnings { logger.warning("\(warning)") }
        let directory = StateLocation.directory(configured: loaded.stateDirectory)
        let database: StateDatabase
        do {
            database = try await Blocking.run { () throws(StateError) in try StateDatabase(directory: directory) }
        } catch {
            logger.critical("\(error.message)")
            throw ExitStatus.runFailed.exitCode
        }
        let reporter = LogReporter(logger: logger)
        let scheduler = Scheduler(config: loaded, configPath: path, stateDirectory: directory, database: database,
                                  reporter: reporter, notifier: notifier)
        // The scheduler turns a graceful shutdown into cancellation of its runs at once, and bounds the stop
        // itself (Scheduler.stopLimitSeconds), so the group needs no shutdown timeout of its own.
        let configuration = ServiceGroupConfiguration(
            services: [.init(service: scheduler, successTerminationBehavior: .gracefullyShutdownGroup)],
            gracefulShutdownSignals: [.sigterm, .sigint],
            logger: logger)
        let group = ServiceGroup(configuration: configuration)
        do {
            try await group.run()
        } catch {
            logger.critical("the daemon stopped on an error: \(error)")
            throw ExitStatus.runFailed.exitCode
        }
    }
}
