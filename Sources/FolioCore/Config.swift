import Foundation

/// The parsed folio.toml: defaults and targets, checked as a whole.
public struct Config: Sendable, Equatable {
    /// The file it came from, for messages.
    public var file: String
    /// `state-dir`; nil means the default (see `StateLocation`).
    public var stateDirectory: String?
    /// `parallel-targets`: how many targets the daemon runs at once (1 to 64, default 2).
    public var parallelTargets = 2
    /// `log-level`: the daemon's log level (trace, debug, info, notice, warning or error; default info).
    public var logLevel = "info"
    /// The `[[target]]` tables, in file order.
    public var targets: [TargetConfig]
    /// Lines (`file:line: …`) about settings that are harmless but probably a mistake (a source setting its target's
    /// source does not use); the commands that run targets print them, and the daemon logs them.
    public var warnings: [String] = []
    /// Where each target is written, in `targets`' order (empty for a configuration not read from text), for the
    /// checks made after parsing.
    public var targetLines: [TargetLines] = []

    /// Where one target is written: its `[[target]]` header and the line of each key it sets.
    public struct TargetLines: Sendable, Equatable {
        /// The line of the `[[target]]` header.
        public var header: Int
        /// The line of each key the target sets, by name.
        public var keys: [String: Int]

        /// The line of `key`, or the header's when the target does not set it (a default).
        public func of(_ key: String) -> Int { keys[key] ?? header }
    }

    /// A configuration with these targets and the defaults for everything else.
    public init(file: String, stateDirectory: String? = nil, targets: [TargetConfig]) {
        self.file = file
        self.stateDirectory = stateDirectory
        self.targets = targets
    }

    /// Where the configuration is read from: `--config`, else `$FOLIO_CONFIG`, else `/etc/folio/folio.toml`.
    public static func location(explicit: String?, environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let explicit { return explicit }
        if let fromEnvironment = environment["FOLIO_CONFIG"], !fromEnvironment.isEmpty { return fromEnvironment }
        return "/etc/folio/folio.toml"
    }

    /// Reads and checks a configuration file.
    public static func load(path: String) throws(ConfigError) -> Config {
        guard !path.isEmpty else { throw ConfigError(file: "--config \"\"", line: nil, message: "names no file; give the configuration file's path") }
        let bytes: [UInt8]
        switch FileContents.read(path) {
        case .success(let read): bytes = read
        case .failure(let failure):
            let message = switch failure.code {
            case ENOENT: "no configuration file here; copy config/folio.example.toml there, or pass --config FILE"
            case EISDIR: "this is a folder, not a configuration file; pass --config FILE with the file's path"
            case EFBIG: "this file is larger than any configuration (\(FileContents.limit >> 20) MiB); pass --config FILE with the right file"
            case EACCES: "cannot read the configuration file (\(failure.reason)); check its permissions"
            default: "cannot read the configuration file (\(failure.reason))"
            }
            throw ConfigError(file: path, line: nil, message: message)
        }
        // Why the byte-order mark is passed over: Windows editors (Notepad) start UTF-8 files with one, and TOML
        // takes it as the start of a key.
        let body = bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? bytes.dropFirst(3) : bytes[...]
        guard let text = String(validating: body, as: UTF8.self) else {
            let lines = body.split(separator: 0x0A, omittingEmptySubsequences: false)
            let line = 1 + (lines.firstIndex { String(validating: $0, as: UTF8.self) == nil } ?? 0)
            throw ConfigError(file: path, line: line, message: "this line is not UTF-8 text; save the file as UTF-8")
        }
        return try parse(text, file: path)
    }

    /// Reads and checks a configuration file for running its targets: `load`, then the destinations as they are on
    /// disk. Why apart from `load`: its checks read paths as text, which cannot see that a symlink makes two
    /// spellings one folder, where two targets would each trash the other's files on every run; `folio status`
    /// reads the file with `load` alone, so a mistake there does not hide the runs that were recorded.
    public static func loadForRunning(path: String) throws(ConfigError) -> Config {
        let config = try load(path: path)
        try config.checkDestinationsApartOnDisk()
        return config
    }

    /// Throws when a target's destination is another's, or inside it, or one of a local source and a destination
    /// is inside the other, once symlinks are resolved.
    public func checkDestinationsApartOnDisk() throws(ConfigError) {
        let line = { (index: Int, key: String) in targetLines.count == targets.count ? targetLines[index].of(key) : nil }
        for (i, target) in targets.enumerated() {
            // The line of the setting the message starts with, as the same check on the text does.
            if let overlap = target.sourceOverlapOnDisk() {
                throw ConfigError(file: file, line: line(i, overlap.hasPrefix("source ") ? "source" : "destination"), message: "target \"\(target.name)\": \(overlap)")
            }
        }
        let real = targets.map { PathText.real($0.destination) }
        for (i, target) in targets.enumerated() {
            for (j, other) in targets.enumerated() where j != i && PathText.isWithin(real[i], real[j]) && (real[i] != real[j] || j < i) {
                let relation = real[i] == real[j] ? "is also" : "is inside"
                throw ConfigError(file: file, line: line(i, "destination"), message: "target \"\(target.name)\": destination \(target.destination) \(relation) target \"\(other.name)\"'s destination \(other.destination) (through a symbolic link: both are \(real[i] == real[j] ? "" : "in ")\(real[j])); give each target a folder of its own")
            }
        }
    }

    /// Parses configuration text; `file` names it in errors.
    public static func parse(_ text: String, file: String) throws(ConfigError) -> Config {
        let tables: [TOMLReader.Table]
        do {
            tables = try TOMLReader.parse(text)
        } catch {
            throw ConfigError(file: file, line: error.line, message: error.message)
        }
        return try ConfigParser(file: file).parse(tables)
    }
}

/// A configuration mistake: where it is and what to write instead. Exit code 2.
public struct ConfigError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The configuration file's path.
    public var file: String
    /// The 1-based line of the mistake; nil when it concerns the file as a whole.
    public var line: Int?
    /// What is wrong and what to write instead.
    public var message: String

    /// Creates an error from where it is and what it says.
    public init(file: String, line: Int?, message: String) {
        self.file = file
        self.line = line
        self.message = message
    }

    /// `file:line: message`, or `file: message` when there is no line.
    public var description: String {
        if let line { return "\(file):\(line): \(message)" }
        return "\(file): \(message)"
    }
}
