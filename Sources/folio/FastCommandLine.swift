/// The command lines that scripts, timers and benchmarks repeat (`folio mirror SOURCE DEST …`, `folio sync --now
/// …`), parsed without argument-parser.
///
/// Why: argument-parser finds a command's options by reflecting on its property wrappers, and the Swift runtime
/// answers each generic requirement that reflection meets by scanning the static binary's protocol conformance
/// records, about 6,500 of them: 3.5 ms of a 21 ms run that finds nothing to do (callgrind: 17.3 of its 37.1 million
/// instructions). This parser knows those two commands with long options only. On anything else (help, a short
/// option, a value that starts with "-", an option given twice, a word it does not know, a number that does not
/// parse) it gives up, and argument-parser parses the line, so every message and error stays argument-parser's.
/// `FastCommandLineTests` hold its answers to argument-parser's, option by option.
enum FastCommandLine {
    /// A parsed command line, ready to run.
    enum Request: Equatable, Sendable {
        case mirror(MirrorRequest)
        case sync(SyncRequest)

        func run() async throws {
            switch self {
            case .mirror(let request): try await request.run()
            case .sync(let request): try await request.run()
            }
        }
    }

    /// The request of `arguments` (without the program's name), or nil when argument-parser must parse them.
    static func request(for arguments: [String]) -> Request? {
        guard let command = arguments.first else { return nil }
        switch command {
        case "mirror": return mirror(arguments.dropFirst()).map(Request.mirror)
        case "sync": return sync(arguments.dropFirst()).map(Request.sync)
        default: return nil
        }
    }

    private static func mirror(_ arguments: ArraySlice<String>) -> MirrorRequest? {
        let flags: Set = ["dry-run", "json", "force", "no-wait", "insecure-tls"]
        let options: Set = ["transfers", "timeout", "max-delete", "trash-days", "bwlimit", "symlinks", "identity",
                            "passphrase-file", "password-file", "known-hosts", "username", "token-file", "ca-file",
                            "webdav", "requests-per-second", "connections"]
        guard let words = Words(arguments, flags: flags, options: options, lists: ["exclude"]),
              words.positionals.count == 2 else { return nil }
        var request = MirrorRequest(source: words.positionals[0], destination: words.positionals[1],
                                    dryRun: words.flags.contains("dry-run"), json: words.flags.contains("json"),
                                    force: words.flags.contains("force"), noWait: words.flags.contains("no-wait"))
        request.insecureTLS = words.flags.contains("insecure-tls")
        for (name, values) in words.options {
            let value = values[0]
            switch name {
            case "transfers": guard let number = Int(value) else { return nil }; request.transfers = number
            case "timeout": guard let number = Int(value) else { return nil }; request.timeout = number
            case "max-delete": request.maxDelete = value
            case "trash-days": guard let number = Int(value) else { return nil }; request.trashDays = number
            case "bwlimit": request.bwlimit = value
            case "exclude": request.exclude = values
            case "symlinks": request.symlinks = value
            case "identity": request.identity = value
            case "passphrase-file": request.passphraseFile = value
            case "password-file": request.passwordFile = value
            case "known-hosts": request.knownHosts = value
            case "username": request.username = value
            case "token-file": request.tokenFile = value
            case "ca-file": request.caFile = value
            case "webdav": request.webdav = value
            case "requests-per-second": guard let number = Double(value) else { return nil }; request.requestsPerSecond = number
            case "connections": guard let number = Int(value) else { return nil }; request.connections = number
            default: return nil
            }
        }
        return request
    }

    private static func sync(_ arguments: ArraySlice<String>) -> SyncRequest? {
        guard let words = Words(arguments, flags: ["now", "dry-run", "json", "force", "no-wait"],
                                options: ["config", "parallel-targets"], lists: []) else { return nil }
        var request = SyncRequest(targets: words.positionals, dryRun: words.flags.contains("dry-run"),
                                  json: words.flags.contains("json"), force: words.flags.contains("force"),
                                  noWait: words.flags.contains("no-wait"))
        for (name, values) in words.options {
            switch name {
            case "config": request.config = values[0]
            case "parallel-targets": guard let number = Int(values[0]) else { return nil }; request.parallelTargets = number
            default: return nil
            }
        }
        return request
    }

    /// A command's words sorted into flags, long options (each with its values, one or more) and positional
    /// values, or nil at the first word that argument-parser alone should read.
    private struct Words {
        var flags: Set<String> = []
        var options: [String: [String]] = [:]
        var positionals: [String] = []

        init?(_ arguments: ArraySlice<String>, flags flagNames: Set<String>, options optionNames: Set<String>, lists listNames: Set<String>) {
            var remaining = arguments[...]
            while let word = remaining.popFirst() {
                // "help" is argument-parser's word for help at any place it could be a command.
                guard word.hasPrefix("-") else {
                    if word == "help" { return nil }
                    positionals.append(word)
                    continue
                }
                // Short options, "-" and "--" are left to argument-parser, as is "--name=" with nothing after it.
                guard word.hasPrefix("--"), word.count > 2 else { return nil }
                var name = word.dropFirst(2)
                var value: Substring?
                if let equals = name.firstIndex(of: "=") {
                    value = name[name.index(after: equals)...]
                    name = name[..<equals]
                }
                let key = String(name)
                // Given twice, a flag is an error and an option's last value wins: argument-parser says which.
                guard !flags.contains(key), options[key] == nil || listNames.contains(key) else { return nil }
                if flagNames.contains(key) {
                    guard value == nil else { return nil }
                    flags.insert(key)
                    continue
                }
                guard optionNames.contains(key) || listNames.contains(key) else { return nil }
                if value == nil { value = remaining.popFirst()?[...] }
                // A value that starts with "-" may be an option's name (argument-parser then reports the value
                // missing), or a negative number, which some options take: argument-parser knows which.
                guard let value, !value.isEmpty, !value.hasPrefix("-") else { return nil }
                options[key, default: []].append(String(value))
            }
        }
    }
}
