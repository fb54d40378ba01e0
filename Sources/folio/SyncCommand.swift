import ArgumentParser
import FolioCore
import FolioState
import Foundation

/// `folio sync --now [TARGET…]`: runs targets from the configuration now.
struct SyncCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "Sync targets from the configuration now.",
        discussion: "Without TARGET names, runs every enabled target whose mode is manual or both."
    )

    @Flag(name: .long, help: "Run now. (`folio sync` always runs at once, with or without it; `folio daemon` is what runs targets on a schedule.)")
    var now = false

    @Argument(help: "Targets to run (default: every enabled target whose mode includes manual).")
    var targets: [String] = []

    @OptionGroup var common: CommonOptions

    @Option(name: .long, help: "How many targets to run at once.")
    var parallelTargets: Int = 1

    @Flag(name: .long, help: "Exit 1 at once if another folio process is syncing a target, instead of waiting.")
    var noWait = false

    func run() async throws {
        // Reads files (and, for the destinations, resolves their real paths): off the cooperative pool.
        let common = self.common
        let config = try await Blocking.run { () throws -> Config in try common.loadConfig() }
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
            reporter: ConsoleReporter(mode: ConsoleReporter.mode(json: common.json)),
            options: SyncEngine.RunOptions(trigger: .manual, dryRun: common.dryRun, force: common.force),
            parallelTargets: parallelTargets, waitForLock: !noWait)
        let status = await coordinator.run(chosen)
        if status != .success { throw status.exitCode }
    }
}
