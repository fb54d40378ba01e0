import ArgumentParser

/// `folio`: keeps local copies of remote folder trees in step with their source, one way.
@main
struct Folio: AsyncParsableCommand {
    static let version = "0.1.0"

    static let configuration = CommandConfiguration(
        commandName: "folio",
        abstract: "Keep local copies of folder trees in step with their source, one way.",
        discussion: """
            Exit codes: 0 every target in step; 1 a target's run failed (destination left consistent); 2 usage or \
            configuration error; 3 finished, but some files failed (retried next run); 4 refused by a safety guard.
            """,
        version: "folio \(version)",
        subcommands: [SyncCommand.self, MirrorCommand.self, StatusCommand.self]
    )
}
