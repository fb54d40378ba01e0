import ArgumentParser
import CFolioSys
import Foundation

/// `folio`: keeps local copies of remote folder trees in step with their source, one way.
@main
struct Folio: AsyncParsableCommand {
    static let version = "0.1.0"

    static let configuration = CommandConfiguration(
        commandName: "folio",
        abstract: "Keep local copies of folder trees in step with their source, one way.",
        discussion: """
            Exit codes: 0 every target in step; 1 a target's run failed (destination left consistent); 2 usage or \
            configuration error; 3 finished, but some files failed (retried next run); 4 refused by a safety guard; \
            130 a second Ctrl-C quit at once.
            """,
        version: "folio \(version)",
        subcommands: [SyncCommand.self, MirrorCommand.self, StatusCommand.self, TrustCommand.self, DaemonCommand.self]
    )

    /// Parses and runs a command, mapping every error to one line on standard error and a documented exit code
    /// (usage and configuration mistakes are 2, not argument-parser's 64).
    static func main() async {
        // Before anything else: without /proc (a chroot or container that did not mount it) Swift's `CommandLine` is
        // empty, and libdispatch, which runs Folio's threads, reads /proc/self/task to watch its thread pool and
        // stops the process (SIGILL) when it cannot, at a random moment of a run. One line instead, and nothing done.
        if access("/proc/self/task", F_OK) != 0 {
            FileDescriptorOutput.writeToStandardError("folio: /proc is not mounted here, and folio needs it (Swift reads the command line there, and its thread pool watches itself there); mount it (mount -t proc proc /proc) or run folio where it is\n")
            Foundation.exit(ExitStatus.runFailed.rawValue)
        }
        // First, before any listing: big arrays must go back to the system when freed (see the shim for why).
        _ = folio_return_large_blocks_to_system()
        // Before any thread starts too: an arena is given to a thread at its first allocation.
        _ = folio_limit_malloc_arenas(2)
        // Also first, while main is the only thread (see the shim; Swift's async main gets here on the process's
        // own thread before any other starts: strace shows the F_DUPFD before the first clone3). An
        // optimisation, so a failure changes nothing.
        _ = folio_reserve_descriptor_table(1023)
        // A hook that exits without reading the paths on its standard input (`systemctl reload`, a script that
        // ignores them) must not kill the daemon or `sync --now` with SIGPIPE (exit 141, the hook then run again
        // next time), nor a reader of the output that goes away stop a run midway: the write fails, and is dropped
        // (every write to standard output and error goes through write(2) or stdio, neither of which traps).
        signal(SIGPIPE, SIG_IGN)
        // A parent that ignores SIGCHLD passes that on through exec, and the kernel would then reap hooks itself:
        // their exit status lost (every hook "succeeded"), and their pid free for reuse while Folio may signal it.
        signal(SIGCHLD, SIG_DFL)
        if let refusal = ArgumentEncoding.refusal() {
            FileDescriptorOutput.writeToStandardError("folio: \(refusal)\n")
            Foundation.exit(ExitStatus.usage.rawValue)
        }
        do {
            let arguments = Array(CommandLine.arguments.dropFirst())
            // The lines that run targets take the fast way when they can (see FastCommandLine for why).
            if let request = FastCommandLine.request(for: arguments) {
                try await request.run()
                return
            }
            try refuseUnknownHelpTopic(arguments)
            var command = try parseAsRoot(arguments)
            if var command = command as? AsyncParsableCommand {
                try await command.run()
            } else {
                try command.run()
            }
        } catch let error as CLIError {
            FileDescriptorOutput.writeToStandardError("folio: \(error)\n")
            Foundation.exit(ExitStatus.usage.rawValue)
        } catch let error as ExitCode {
            Foundation.exit(error.rawValue)
        } catch {
            let code = exitCode(for: error)
            if code == .success {
                print(fullMessage(for: error))
                Foundation.exit(0)
            }
            FileDescriptorOutput.writeToStandardError("folio: \(usageLine(for: error))\n")
            Foundation.exit(code.rawValue == 64 ? ExitStatus.usage.rawValue : code.rawValue)
        }
    }

    /// Refuses `folio help WORD` for a word that is no command. Why: argument-parser answers it with the overall
    /// help and exit 0, so a mistyped command in a script passed for a working one.
    static func refuseUnknownHelpTopic(_ arguments: [String]) throws(CLIError) {
        guard arguments.first == "help", let topic = arguments.dropFirst().first, !topic.hasPrefix("-") else { return }
        let names = configuration.subcommands.compactMap { $0.configuration.commandName }
        // `help` is argument-parser's own command: `folio help help` is its help.
        guard !names.contains(topic), topic != "help" else { return }
        let list = names.dropLast().joined(separator: ", ") + " and " + (names.last ?? "")
        throw .usage("there is no command \(JSONLine.quote(topic)); the commands are \(list) (folio help COMMAND)")
    }

    /// argument-parser's error as one line, as every other error is: its message, then the command whose help
    /// says the rest. Why not its full message: that adds the argument's help and the command's usage on lines
    /// of their own (three or four in all, the usage of `sync` longer than a terminal's line), and the help has
    /// both.
    static func usageLine(for error: any Error) -> String {
        let message = message(for: error).split(whereSeparator: \.isNewline).joined(separator: "; ")
        // The full message ends "See 'folio mirror --help' for more information." for the command that was
        // being parsed: the one place that names it.
        let help = fullMessage(for: error, columns: Int.max).split(whereSeparator: \.isNewline).lazy.compactMap { line -> Substring? in
            guard let start = line.range(of: "See '"), let end = line[start.upperBound...].firstIndex(of: "'") else { return nil }
            return line[start.upperBound..<end]
        }.first ?? "folio --help"
        return "\(message); see \(help)"
    }
}
