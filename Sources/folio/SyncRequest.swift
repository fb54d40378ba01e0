import FolioCore
import FolioState
import Foundation

/// What `folio sync` was asked to do, and doing it: the parsed command line, from argument-parser's `SyncCommand`
/// or from `FastCommandLine`.
struct SyncRequest: Equatable, Sendable {
    /// The values of the options not given; `SyncCommand` declares them, so `--help` shows them.
    static let defaults = SyncRequest()

    var targets: [String] = []
    var config: String?
    var dryRun = false
    var json = false
    var force = false
    var parallelTargets = 1
    var noWait = false

    func run() async throws {
        // Reads files (and, for the destinations, resolves their real paths): off the cooperative pool.
        let configPath = self.config
        let config = try await Blocking.run { () throws -> Config in try Self.loadConfig(configPath) }
        for warning in config.warnings { FileDescriptorOutput.writeToStandardError("folio: warning: \(warning)\n") }
        let chosen: [TargetConfig]
        if targets.isEmpty {
            chosen = config.targets.filter { $0.enabled && $0.mode.includes(.manual) }
            if chosen.isEmpty {
                guard let example = config.targets.first else {
                    throw CLIError.usage("\(config.file): no [[target]] in it; add one (config/folio.example.toml shows how)")
                }
                throw CLIError.usage("\(config.file): no enabled target has mode manual or both; name the targets to run, e.g. folio sync --now \(example.name)")
            }
        } else {
            // Why each name once: a target named twice ran twice, and with --parallel-targets its second run
            // waited on the first's lock, calling its own process "another folio process".
            var seen = Set<String>()
            chosen = try targets.filter { seen.insert($0).inserted }.map { name in
                guard let target = config.targets.first(where: { $0.name == name }) else {
                    let known = config.targets.map(\.name).joined(separator: ", ")
                    throw CLIError.usage("no target named \"\(name)\" in \(config.file); targets: \(known.isEmpty ? "none" : known)")
                }
                return target
            }
        }
        guard parallelTargets >= 1 else { throw CLIError.usage("--parallel-targets must be at least 1") }
        let coordinator = RunCoordinator(
            stateDirectory: StateLocation.directory(configured: config.stateDirectory),
            reporter: ConsoleReporter(mode: ConsoleReporter.mode(json: json)),
            options: SyncEngine.RunOptions(trigger: .manual, dryRun: dryRun, force: force),
            parallelTargets: parallelTargets, waitForLock: !noWait)
        let status = await coordinator.run(chosen)
        if status != .success { throw status.exitCode }
    }

    /// The configuration at `path` (else where `Config.location` looks), its errors as usage errors (exit 2).
    private static func loadConfig(_ path: String?) throws -> Config {
        do {
            return try Config.loadForRunning(path: Config.location(explicit: path))
        } catch {
            throw CLIError.usage(error.description)
        }
    }
}
