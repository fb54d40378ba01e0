import ArgumentParser
import FolioCore
import FolioSFTP
import Foundation
import Glibc

/// `folio trust sftp://host[:port]`: shows an SFTP server's host key and, once a person agrees, adds it to
/// known_hosts. The only way Folio comes to trust a host; a changed key is never replaced from here.
struct TrustCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "trust",
        abstract: "Show an SFTP server's host key and add it to known_hosts.",
        discussion: """
            Folio refuses servers whose key is not in known_hosts. Compare the fingerprint shown with the server's own \
            (ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub, run on the server) before trusting it.
            """
    )

    @Argument(help: "The server, as sftp://host[:port] or host[:port] (a path after it is ignored).") var server: String
    @Option(name: .long, help: "The known_hosts file to add the key to (default ~/.ssh/known_hosts).") var knownHosts: String?
    @Flag(name: .long, help: "Trust the key without asking.") var yes = false
    @Option(name: .long, help: "Seconds to wait for the server.") var timeout: Int = 30

    func run() throws {
        let location: SourceLocation
        // A bare host (`folio trust nas.local`) means SFTP: trust has no other kind of server.
        let url = server.contains("://") ? server : "sftp://" + server
        do { location = try SourceLocation(parsing: url) } catch { throw CLIError.usage(error.message) }
        guard case let .sftp(_, host, port, _) = location.kind else {
            throw CLIError.usage("\(server) is not an sftp:// URL; write sftp://host[:port]")
        }
        let range = TargetConfig.timeoutRange
        guard range.contains(timeout) else {
            throw CLIError.usage("--timeout must be a whole number from \(range.lowerBound) to \(range.upperBound), as in a configuration")
        }
        let file = knownHosts.map(PathText.fromCommandLine) ?? HostKeyTrust.defaultKnownHostsPath
        let name = "sftp://\(host.contains(":") ? "[\(host)]" : host):\(port)"

        let fetched: (key: HostKeyTrust.HostKey, standing: HostKeyTrust.Standing)
        do { fetched = try HostKeyTrust.fetch(host: host, port: port, knownHostsPath: file, timeoutSeconds: timeout) } catch { try fail("\(error)") }
        let key = fetched.key
        print("\(name) offers \(key.keyType.first.map { "aeiou".contains($0) } == true ? "an" : "a") \(key.keyType) key with fingerprint \(key.fingerprint)")
        switch fetched.standing {
        case .trusted:
            print("already trusted in \(file)")
            return
        case .changed:
            try fail("\(name) is listed in \(file) with a different \(key.keyType) key; if the server was reinstalled, remove its old line there first (ssh-keygen -R '\(HostKeyTrust.knownHostsName(host: host, port: port))' -f \(file) finds it, hashed or not)")
        case .revoked:
            try fail("not trusting \(name): \(file) marks this key @revoked; the server needs a new host key")
        case .unknown:
            break
        }
        if !yes {
            guard isatty(STDIN_FILENO) != 0 else {
                try fail("not trusting \(name): no terminal to ask on; compare the fingerprint, then run again with --yes")
            }
            print("Trust this key? [y/N] ", terminator: "")
            fflush(nil)  // all C streams: print buffers stdout, and the prompt has no newline
            let answer = readLine()?.trimmingCharacters(in: .whitespaces).lowercased()
            guard answer == "y" || answer == "yes" else { try fail("not trusted; \(file) is unchanged") }
        }
        do { try HostKeyTrust.append(key, to: file) } catch { try fail("\(error)") }
        print("added \(name) to \(file)")
    }

    /// One line on standard error, then exit status 1.
    private func fail(_ message: String) throws -> Never {
        // Standard output first: piped, it is buffered, and the fingerprint line came after the advice to compare it.
        fflush(nil)
        FileDescriptorOutput.writeToStandardError("folio: \(message)\n")
        throw ExitCode(1)
    }
}
