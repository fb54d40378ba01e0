import ArgumentParser

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
    var parallelTargets: Int = SyncRequest.defaults.parallelTargets

    @Flag(name: .long, help: "Exit 1 at once if another folio process is syncing a target, instead of waiting.")
    var noWait = false

    /// The command line's answers, apart from argument-parser's property wrappers.
    var request: SyncRequest {
        SyncRequest(targets: targets, config: common.config, dryRun: common.dryRun, json: common.json, force: common.force,
                    parallelTargets: parallelTargets, noWait: noWait)
    }

    func run() async throws { try await request.run() }
}
