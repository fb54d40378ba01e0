import ArgumentParser

/// Options shared by the commands that run targets.
struct CommonOptions: ParsableArguments {
    @Option(name: .long, help: "Configuration file (default: $FOLIO_CONFIG, else /etc/folio/folio.toml).")
    var config: String?

    @Flag(name: .long, help: "Show what would change; change nothing.")
    var dryRun = false

    @Flag(name: .long, help: "Write NDJSON events to standard output, one object per line (docs/json-events.md lists them).")
    var json = false

    @Flag(name: .long, help: "Allow a run past the max-delete, empty-source and missing-destination guards.")
    var force = false
}
