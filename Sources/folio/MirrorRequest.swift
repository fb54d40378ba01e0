import FolioCore
import FolioState
import Foundation

/// What `folio mirror` was asked to do, and doing it: the parsed command line, from argument-parser's
/// `MirrorCommand` or from `FastCommandLine`.
struct MirrorRequest: Equatable, Sendable {
    /// The values of the options not given; `MirrorCommand` declares them, so `--help` shows them.
    static let defaults = MirrorRequest(source: "", destination: "")

    var source: String
    var destination: String
    var dryRun = false
    var json = false
    var force = false
    var noWait = false
    var transfers: Int?
    var timeout = 30
    var maxDelete = "50%"
    var trashDays = 30
    var bwlimit: String?
    var exclude: [String] = []
    var symlinks = "skip"
    var identity: String?
    var passphraseFile: String?
    var passwordFile: String?
    var knownHosts: String?
    var username: String?
    var tokenFile: String?
    var caFile: String?
    var insecureTLS = false
    var webdav = "auto"
    var requestsPerSecond: Double?
    var connections: Int?

    func run() async throws {
        let (target, sourceKeys) = try makeTarget()
        for flag in unusedFlags(sourceKeys, source: target.source) {
            FileDescriptorOutput.writeToStandardError("folio: warning: \(flag)\n")
        }
        // Reads the filesystem: off the cooperative pool. A usage error (exit 2), as the same folders spelt alike are.
        if let overlap = await Blocking.run({ target.sourceOverlapOnDisk() }) { throw CLIError.usage(overlap) }
        let coordinator = RunCoordinator(
            stateDirectory: StateLocation.directory(configured: nil),
            reporter: ConsoleReporter(mode: ConsoleReporter.mode(json: json)),
            options: SyncEngine.RunOptions(trigger: .manual, dryRun: dryRun, force: force),
            parallelTargets: 1, waitForLock: !noWait)
        let status = await coordinator.run([target])
        if status != .success { throw status.exitCode }
    }

    /// The flags as a target, checked like a configuration file's, and the source settings they set (by their
    /// configuration keys).
    func makeTarget() throws -> (target: TargetConfig, sourceKeys: [String]) {
        // Why refused: an empty argument (a script's unset "$DEST") read as a path is the working folder, whose
        // every entry the run would then remove.
        for (name, value) in [("SOURCE", source), ("DEST", destination)] where value.isEmpty {
            throw CLIError.usage("\(name) is empty (an unset variable in a script?); give the folder or URL")
        }
        // Checked here, not by the configuration's parser, whose line would name the key as a file spells it.
        let percent = maxDelete.hasSuffix("%") ? Int(maxDelete.dropLast()) : nil
        guard Int(maxDelete).map({ $0 >= 0 }) ?? percent.map({ (0...100).contains($0) }) ?? false else {
            throw CLIError.usage("--max-delete is a count (--max-delete 100) or a percentage from 0% to 100% (--max-delete 50%), not \(JSONLine.quote(maxDelete))")
        }
        guard ["auto", "true", "false"].contains(webdav) else {
            throw CLIError.usage("--webdav is auto, true or false, not \(JSONLine.quote(webdav))")
        }
        // Lexically normal (no `.`, `..` or trailing slash), so `dst`, `./dst` and `dst/` are one target.
        let absolute = URL(fileURLWithPath: absolutePath(destination)).standardizedFileURL.path
        let sourceText = source.contains("://") || source.hasPrefix("/") ? source : FileManager.default.currentDirectoryPath + "/" + source
        if let meant = SourceLocation.urlMissingSlashes(source), !FileManager.default.fileExists(atPath: sourceText) {
            throw CLIError.usage("SOURCE is not a URL (\"://\" is missing) nor a folder here; did you mean \(meant)?")
        }
        // An error here, not the configuration's warning: nothing was set up from it yet, and the user is there to fix it.
        if let glob = ExcludeFilter.unclosedSets(in: exclude).first {
            throw CLIError.usage("--exclude \(quoted(glob)) has a \"[\" that no \"]\" closes, so it would match a \"[\" in names; close the set, or write \\[ for a literal \"[\"")
        }
        // Before the configuration's own check, whose message would name the keys, not the flags.
        if case .http? = try? SourceLocation(parsing: sourceText).kind {
            var credentials = SourceSettings()
            (credentials.username, credentials.passwordFile, credentials.tokenFile) = (username, passwordFile, tokenFile)
            if let problem = credentials.httpCredentialsProblem(naming: { "--" + $0 }) { throw CLIError.usage(problem.message) }
        }
        var toml = "[[target]]\nname = \"mirror\"\nsource = \(quoted(sourceText))\ndestination = \(quoted(absolute))\n"
        if let transfers { toml += "transfers = \(transfers)\n" }
        toml += "timeout = \(timeout)\ntrash-days = \(trashDays)\nsymlinks = \(quoted(symlinks))\n"
        toml += Int(maxDelete).map { "max-delete = \($0)\n" } ?? "max-delete = \(quoted(maxDelete))\n"
        toml += "exclude = [\(exclude.map(quoted).joined(separator: ", "))]\n"
        if let bwlimit {
            guard BandwidthLimit.parse(bwlimit) != nil else {
                throw CLIError.usage("--bwlimit \(quoted(bwlimit)) is not a rate of at least 1 KiB/s; write a number in KiB/s (500) or one with a unit (500K, 2M, 1.5MiB/s)")
            }
            toml += "bandwidth-limit = \(quoted(bwlimit))\n"
        }
        var sourceKeys: [String] = []
        func add(_ key: String, _ value: String) {
            toml += "\(key) = \(value)\n"
            sourceKeys.append(key)
        }
        for (key, value) in [("identity", identity), ("passphrase-file", passphraseFile), ("password-file", passwordFile),
                             ("known-hosts", knownHosts), ("username", username), ("token-file", tokenFile), ("ca-file", caFile)] {
            if let value { add(key, quoted(key == "username" ? value : absolutePath(value))) }
        }
        if insecureTLS { add("insecure-tls", "true") }
        if webdav != "auto" { add("webdav", webdav) }
        if let requestsPerSecond { add("requests-per-second", "\(requestsPerSecond)") }
        if let connections { add("connections", "\(connections)") }
        var target: TargetConfig
        do {
            let config = try Config.parse(toml, file: "command line")
            target = config.targets[0]
        } catch {
            // Name the flag, not the generated line's key, nor the target's generated name.
            var message = error.message
            if message.hasPrefix("target \"mirror\": ") { message.removeFirst("target \"mirror\": ".count) }
            for key in ["transfers", "timeout", "trash-days", "symlinks", "webdav", "requests-per-second", "connections"] where message.hasPrefix(key + " ") {
                message = "--" + message.replacingOccurrences(of: "\"\(key)\"", with: "--\(key)")
                break
            }
            throw CLIError.usage(message)
        }
        target.name = "mirror:" + absolute
        return (target, sourceKeys)
    }

    /// The source flags given that this kind of source does not use, each as a warning, as a configuration's
    /// unused keys are: the run goes on, but a mistaken source (a local path where a URL was meant) shows.
    private func unusedFlags(_ sourceKeys: [String], source: String) -> [String] {
        guard let kind = try? SourceLocation(parsing: source).kind else { return [] }
        let (used, sourceName) = SourceSettings.keysUsed(by: kind)
        return sourceKeys.filter { !used.contains($0) }.map { "--\($0) is not used with \(sourceName), this run's source; remove it, or check the source" }
    }

    private func absolutePath(_ path: String) -> String { PathText.fromCommandLine(path) }

    private func quoted(_ text: String) -> String { JSONLine.quote(text) }
}
