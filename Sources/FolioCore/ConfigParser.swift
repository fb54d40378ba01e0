import Foundation

/// Turns TOML tables into a checked `Config`, with an error naming `file:line`, the key and what to write instead.
struct ConfigParser {
    let file: String

    static let globalKeys = ["state-dir", "parallel-targets", "log-level"]
    /// Keys a target may set, that may also stand at the top level as a default for every target.
    static let defaultableKeys = ["transfers", "interval", "max-delete", "trash-days", "timeout", "symlinks", "known-hosts", "bandwidth-limit"]
    static let targetKeys = ["name", "source", "destination", "mode", "enabled", "exclude", "on-change", "on-change-timeout",
                             "identity", "passphrase-file", "password-file", "webdav", "username", "token-file",
                             "ca-file", "insecure-tls", "requests-per-second", "connections"] + defaultableKeys

    func parse(_ tables: [TOMLReader.Table]) throws(ConfigError) -> Config {
        var config = Config(file: file, targets: [])
        var defaults = TargetConfig(name: "", source: "", destination: "")
        var stateDirectory: String?

        for key in tables[0].keys {
            switch key.name {
            case "state-dir": stateDirectory = try absolutePath(key)
            case "parallel-targets": config.parallelTargets = try integer(key, in: 1...64)
            case "log-level":
                let level = try string(key)
                guard ["trace", "debug", "info", "notice", "warning", "error"].contains(level) else {
                    throw error(key, "log-level must be one of trace, debug, info, notice, warning, error")
                }
                config.logLevel = level
            case let name where Self.defaultableKeys.contains(name):
                try apply(key, to: &defaults)
            case let name where Self.targetKeys.contains(name):
                throw error(key, "\(name) belongs in a [[target]] table")
            default:
                throw unknownKey(key, known: Self.globalKeys + Self.defaultableKeys)
            }
        }
        config.stateDirectory = stateDirectory

        var targetLines: [Config.TargetLines] = []
        for table in tables.dropFirst() {
            guard table.header == "target", table.isArrayElement else {
                let written = table.isArrayElement ? "[[\(table.header ?? "")]]" : "[\(table.header ?? "")]"
                throw ConfigError(file: file, line: table.line, message: "unknown table \(written); targets are written [[target]]")
            }
            var target = defaults
            var seen: Set<String> = []
            for key in table.keys {
                guard Self.targetKeys.contains(key.name) else {
                    if Self.globalKeys.contains(key.name) { throw error(key, "\(key.name) is a top-level key; move it above the first [[target]]") }
                    throw unknownKey(key, known: Self.targetKeys)
                }
                seen.insert(key.name)
                try apply(key, to: &target)
            }
            for required in ["name", "source", "destination"] where !seen.contains(required) {
                throw ConfigError(file: file, line: table.line, message: "this [[target]] has no \(required); add \(required) = \"…\"")
            }
            config.warnings += unusedSettings(of: target, keys: table.keys)
            try checkCredentials(of: target, keys: table.keys)
            // A warning, as for the settings above: a configuration that loaded before must still load.
            if let key = table.keys.first(where: { $0.name == "exclude" }) {
                config.warnings += ExcludeFilter.unclosedSets(in: target.exclude).map { glob in
                    ConfigError(file: file, line: key.line, message: "target \"\(target.name)\": exclude pattern \"\(glob)\" has a \"[\" that no \"]\" closes, "
                                + "so it matches a \"[\" in names; close the set, or write \"\\\\[\" for a literal \"[\"").description
                }
            }
            config.targets.append(target)
            targetLines.append(Config.TargetLines(header: table.line, keys: Dictionary(table.keys.map { ($0.name, $0.line) }) { first, _ in first }))
        }
        try checkTargets(config.targets, lines: targetLines)
        config.targetLines = targetLines
        return config
    }

    /// The source settings a target sets that its kind of source does not use, each as a `file:line: …` line.
    /// Why a warning, not an error: such a setting is harmless, and a configuration that loaded before (a source
    /// changed from sftp:// to a mounted folder, its `identity` left behind) must still load; but a key meant for
    /// another target, or a mistaken source, should not pass unseen.
    private func unusedSettings(of target: TargetConfig, keys: [TOMLReader.Key]) -> [String] {
        guard let kind = try? SourceLocation(parsing: target.source).kind else { return [] }
        let (used, source) = SourceSettings.keysUsed(by: kind)
        return keys.filter { SourceSettings.allKeys.contains($0.name) && !used.contains($0.name) }.map { key in
            ConfigError(file: file, line: key.line, message: "target \"\(target.name)\": \(key.name) is not used with \(source), this target's source; remove it, or check that it is in the right target").description
        }
    }

    /// An HTTP source's credentials are a bearer token, or a user name with its password: a half or a mix is an
    /// error here, with the line to fix, rather than at every run (in the daemon's log, without a line).
    private func checkCredentials(of target: TargetConfig, keys: [TOMLReader.Key]) throws(ConfigError) {
        // Why only an enabled target: a disabled one never runs, and must not stop the file loading.
        guard target.enabled, case .http? = try? SourceLocation(parsing: target.source).kind,
              let problem = target.sourceSettings.httpCredentialsProblem() else { return }
        let line = keys.last { $0.name == problem.key }?.line ?? keys.first?.line ?? 0
        throw ConfigError(file: file, line: line, message: "target \"\(target.name)\": \(problem.message)")
    }

    /// Applies one target key (or top-level default) to a target.
    func apply(_ key: TOMLReader.Key, to target: inout TargetConfig) throws(ConfigError) {
        switch key.name {
        case "name":
            let name = try string(key)
            guard Self.isValidTargetName(name) else {
                throw error(key, "target name \"\(name)\" may use only a-z, 0-9, '.', '_' and '-'")
            }
            target.name = name
        case "source":
            let source = try string(key)
            do { _ = try SourceLocation(parsing: source) } catch { throw self.error(key, error.message) }
            target.source = source
        case "destination": target.destination = try absolutePath(key)
        case "mode":
            let text = try string(key)
            guard let mode = TargetConfig.Mode(rawValue: text) else { throw error(key, "mode must be \"manual\", \"automatic\" or \"both\"") }
            target.mode = mode
        case "enabled": target.enabled = try bool(key)
        case "interval":
            let text = try string(key, hint: "write it with a unit, e.g. interval = \"15m\"")
            guard let seconds = DurationText.seconds(text) else {
                throw error(key, "interval \"\(text)\" is not a duration; write e.g. \"90s\", \"15m\", \"2h\" or \"1d\"")
            }
            guard seconds >= 1 else { throw error(key, "interval \"\(text)\" is shorter than a second; write at least \"1s\"") }
            target.interval = seconds
        case "transfers": target.transfers = try integer(key, in: 1...64)
        case "max-delete":
            switch key.value {
            case .integer(let count) where count >= 0: target.maxDelete = .count(Int(count))
            case .string(let text) where text.hasSuffix("%"):
                try checkNoControl(text, key)
                guard let percent = Int(text.dropLast()), percent >= 0 else {
                    throw error(key, "max-delete \"\(text)\" is not a percentage; write e.g. \"50%\"")
                }
                guard percent <= 100 else {
                    throw error(key, "max-delete \"\(text)\" is more than all entries; write a percentage from \"0%\" to \"100%\", or a count")
                }
                target.maxDelete = .percent(percent)
            default: throw error(key, "max-delete is a count (max-delete = 100) or a percentage (max-delete = \"50%\")")
            }
        case "trash-days": target.trashDays = try integer(key, in: 0...36_500)
        case "bandwidth-limit":
            let text: String
            switch key.value {
            case .integer(let kibibytes): text = "\(kibibytes)"
            case .string(let written): text = written
            default: text = ""
            }
            try checkNoControl(text, key)
            guard let limit = BandwidthLimit.parse(text) else {
                throw error(key, "bandwidth-limit is a rate of at least 1 KiB/s: a number in KiB/s (500) or with a unit (\"500K\", \"2M\", \"1.5MiB/s\"), or \"off\"")
            }
            target.bandwidthLimit = limit
        case "timeout": target.timeout = try integer(key, in: TargetConfig.timeoutRange)
        case "symlinks":
            let text = try string(key)
            guard let policy = ListingOptions.SymlinkPolicy(rawValue: text) else { throw error(key, "symlinks must be \"skip\" or \"follow\"") }
            target.symlinks = policy
        case "exclude": target.exclude = try stringList(key, example: "[\"*.tmp\"]")
        case "on-change":
            let command = try stringList(key, example: "[\"/usr/local/bin/refresh\", \"{target}\"]")
            guard let program = command.first, program.hasPrefix("/") else {
                throw error(key, "on-change is a command as a list starting with an absolute path, e.g. [\"/usr/local/bin/refresh\", \"{target}\"]")
            }
            target.onChange = command
        case "on-change-timeout":
            let text = try string(key, hint: "write it with a unit, e.g. on-change-timeout = \"15m\"")
            guard let seconds = DurationText.seconds(text) else {
                throw error(key, "on-change-timeout \"\(text)\" is not a duration; write e.g. \"90s\", \"15m\" or \"2h\"")
            }
            guard seconds >= 1 else { throw error(key, "on-change-timeout \"\(text)\" is shorter than a second; write at least \"1s\"") }
            target.onChangeTimeout = seconds
        case "identity": target.sourceSettings.identity = try absolutePath(key)
        case "passphrase-file": target.sourceSettings.passphraseFile = try secretPath(key)
        case "password-file": target.sourceSettings.passwordFile = try secretPath(key)
        case "token-file": target.sourceSettings.tokenFile = try secretPath(key)
        case "known-hosts": target.sourceSettings.knownHosts = try absolutePath(key)
        case "ca-file": target.sourceSettings.caFile = try absolutePath(key)
        case "username": target.sourceSettings.username = try string(key)
        case "insecure-tls": target.sourceSettings.insecureTLS = try bool(key)
        case "webdav":
            switch key.value {
            case .bool(let value): target.sourceSettings.webdav = value
            case .string("auto"): target.sourceSettings.webdav = nil
            default: throw error(key, "webdav must be \"auto\", true or false")
            }
        case "connections": target.sourceSettings.connections = try integer(key, in: 1...64)
        case "requests-per-second":
            switch key.value {
            case .integer(let value) where value > 0: target.sourceSettings.requestsPerSecond = Double(value)
            case .float(let value) where value > 0: target.sourceSettings.requestsPerSecond = value
            default: throw error(key, "requests-per-second must be a number above 0, e.g. 5 or 0.5")
            }
        default:
            throw unknownKey(key, known: Self.targetKeys)
        }
    }

    static func isValidTargetName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 64 && name.utf8.allSatisfy { c in
            (c >= UInt8(ascii: "a") && c <= UInt8(ascii: "z")) || (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9"))
                || c == UInt8(ascii: ".") || c == UInt8(ascii: "_") || c == UInt8(ascii: "-")
        } && name != "." && name != ".."
    }

    /// The checks between a target's settings and other targets': each error names the line of the key to change.
    private func checkTargets(_ targets: [TargetConfig], lines: [Config.TargetLines]) throws(ConfigError) {
        for (i, target) in targets.enumerated() {
            if let first = targets[..<i].firstIndex(where: { $0.name == target.name }) {
                throw ConfigError(file: file, line: lines[i].of("name"), message: "target name \"\(target.name)\" is already used at line \(lines[first].of("name")); give each target its own name")
            }
            let destination = PathText.normalized(target.destination)
            if case .local(let sourcePath)? = try? SourceLocation(parsing: target.source).kind {
                let source = PathText.normalized(sourcePath)
                if destination == source {
                    throw ConfigError(file: file, line: lines[i].of("destination"), message: "target \"\(target.name)\": destination \(target.destination) is its source; choose a destination outside it")
                }
                if PathText.isWithin(destination, source) {
                    throw ConfigError(file: file, line: lines[i].of("destination"), message: "target \"\(target.name)\": destination \(target.destination) is inside its source \(sourcePath); choose a destination outside it")
                }
                if PathText.isWithin(source, destination) {
                    throw ConfigError(file: file, line: lines[i].of("source"), message: "target \"\(target.name)\": source \(sourcePath) is inside its destination \(target.destination); choose a destination outside it")
                }
            }
            for (j, other) in targets.enumerated() where j != i {
                let otherDestination = PathText.normalized(other.destination)
                if PathText.isWithin(destination, otherDestination) && (destination != otherDestination || j < i) {
                    let relation = destination == otherDestination ? "is also" : "is inside"
                    throw ConfigError(file: file, line: lines[i].of("destination"), message: "target \"\(target.name)\": destination \(target.destination) \(relation) target \"\(other.name)\"'s destination \(other.destination); give each target a folder of its own")
                }
            }
        }
    }

    // MARK: typed values

    private func error(_ key: TOMLReader.Key, _ message: String) -> ConfigError {
        ConfigError(file: file, line: key.line, message: message)
    }

    private func unknownKey(_ key: TOMLReader.Key, known: [String]) -> ConfigError {
        let suggestion = known.min { Self.distance($0, key.name) < Self.distance($1, key.name) }
        if let suggestion, Self.distance(suggestion, key.name) <= max(2, key.name.count / 3) {
            return error(key, "unknown key \"\(key.name)\"; did you mean \"\(suggestion)\"?")
        }
        return error(key, "unknown key \"\(key.name)\"; known keys here: \(known.joined(separator: ", "))")
    }

    private func string(_ key: TOMLReader.Key, hint: String? = nil) throws(ConfigError) -> String {
        guard case .string(let text) = key.value else {
            throw error(key, "\(key.name) must be a string, not \(key.value.typeName)" + (hint.map { "; \($0)" } ?? "; put it in quotes"))
        }
        try checkNoControl(text, key)
        return text
    }

    /// No setting holds a control character but a tab (written as an escape, `\u001b`): none is a name Folio
    /// mirrors or a path anyone means, and a message echoing the value would act on the terminal. A tab may be
    /// meant (an `on-change` argument), and is harmless in a message; so are line breaks, where allowed.
    private func checkNoControl(_ text: String, _ key: TOMLReader.Key, allowingLineBreaks: Bool = false) throws(ConfigError) {
        let allowed: Set<Unicode.Scalar> = allowingLineBreaks ? ["\t", "\n", "\r"] : ["\t"]
        guard let control = text.unicodeScalars.first(where: { $0.value < 0x20 && !allowed.contains($0) || $0.value == 0x7F }) else { return }
        throw error(key, "\(key.name) holds the control character \(RelativePath.display([UInt8(control.value)])); remove it")
    }

    private func bool(_ key: TOMLReader.Key) throws(ConfigError) -> Bool {
        guard case .bool(let value) = key.value else { throw error(key, "\(key.name) must be true or false, not \(key.value.typeName)") }
        return value
    }

    private func integer(_ key: TOMLReader.Key, in range: ClosedRange<Int>) throws(ConfigError) -> Int {
        guard case .integer(let value) = key.value, range.contains(Int(value)) else {
            throw error(key, "\(key.name) must be a whole number from \(range.lowerBound) to \(range.upperBound)")
        }
        return Int(value)
    }

    private func stringList(_ key: TOMLReader.Key, example: String) throws(ConfigError) -> [String] {
        guard case .array(let items) = key.value else { throw error(key, "\(key.name) must be a list of strings, e.g. \(example)") }
        var strings: [String] = []
        for item in items {
            guard case .string(let text) = item else { throw error(key, "\(key.name) must hold only strings in quotes") }
            // A hook's argument may be a script of several lines (`["/bin/sh", "-c", """…"""]`).
            try checkNoControl(text, key, allowingLineBreaks: key.name == "on-change")
            strings.append(text)
        }
        return strings
    }

    private func absolutePath(_ key: TOMLReader.Key) throws(ConfigError) -> String {
        let path = try string(key)
        guard path.hasPrefix("/") else { throw error(key, "\(key.name) must be an absolute path (starting with /), not \"\(path)\"") }
        return path
    }

    /// A secret file: absolute, or a bare credential name looked up in `$CREDENTIALS_DIRECTORY` (systemd).
    private func secretPath(_ key: TOMLReader.Key) throws(ConfigError) -> String {
        let path = try string(key)
        guard !path.isEmpty else { throw error(key, "\(key.name) is empty; give the path of a file holding the secret") }
        return path
    }

    static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        var previous = Array(0...b.count)
        for i in 1...max(a.count, 1) where !a.isEmpty {
            var row = [i] + Array(repeating: 0, count: b.count)
            for j in 1...max(b.count, 1) where !b.isEmpty {
                row[j] = min(previous[j] + 1, row[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            previous = row
        }
        return previous[b.count]
    }
}
