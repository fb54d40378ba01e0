import ArgumentParser
import Foundation
import XCTest

@testable import folio

/// `FastCommandLine` gives argument-parser's answer or none: every line it parses, argument-parser parses to the
/// same request; the lines it leaves are argument-parser's to parse or refuse.
final class FastCommandLineTests: XCTestCase {
    /// argument-parser's request for `line`, or nil when it refuses the line or asks for help.
    private func parsedByArgumentParser(_ line: [String]) -> FastCommandLine.Request? {
        switch try? Folio.parseAsRoot(line) {
        case let command as MirrorCommand: .mirror(command.request)
        case let command as SyncCommand: .sync(command.request)
        default: nil
        }
    }

    /// Asserts that the fast parser parses `line`, as argument-parser does.
    private func assertFast(_ line: [String], file: StaticString = #filePath, lineNumber: UInt = #line) {
        let fast = FastCommandLine.request(for: line)
        XCTAssertNotNil(fast, "not parsed: \(line)", file: file, line: lineNumber)
        XCTAssertEqual(fast, parsedByArgumentParser(line), "\(line)", file: file, line: lineNumber)
    }

    func testTheLinesThatScriptsAndBenchmarksRepeatAreParsedAsArgumentParserParsesThem() {
        assertFast(["mirror", "/srv/media", "/mnt/media"])
        assertFast(["mirror", "--json", "--transfers", "8", "sftp://root@127.0.0.1:2222/srv/a b", "/tmp/dest",
                    "--identity", "/tmp/key", "--known-hosts", "/tmp/known_hosts"])
        assertFast(["mirror", "https://example.org/files/", "dest", "--username", "me", "--password-file=/etc/pw",
                    "--exclude", "*.tmp", "--exclude=.cache/", "--max-delete", "50%", "--bwlimit", "2M"])
        assertFast(["sync", "--now"])
        assertFast(["sync", "--now", "media", "photos", "--config", "/etc/folio/folio.toml", "--json", "--no-wait"])
        assertFast(["sync", "media", "--now", "--parallel-targets", "2", "--dry-run", "--force", "media"])
        assertFast(["mirror", "", "dest"])  // refused by the run, as from argument-parser: "SOURCE is empty"
        assertFast(["mirror", "caf\u{E9} #1 100%", "d\u{FC}r", "--username", "help"])
    }

    /// Every option `folio mirror` and `folio sync` declare, in both spellings, with values of each kind.
    func testEveryOptionIsParsedAsArgumentParserParsesIt() throws {
        for (command, positionals) in [("mirror", ["src", "dst"]), ("sync", ["media"])] {
            let options = try declaredOptions(of: command)
            XCTAssertGreaterThan(options.count, 4, command)
            for (name, takesValue) in options {
                var lines: [[String]] = []
                if takesValue {
                    for value in ["7", "2.5", "50%", "a b", "\u{FC}"] {
                        lines += [[command, "--\(name)", value] + positionals, [command] + positionals + ["--\(name)=\(value)"]]
                    }
                } else {
                    lines = [[command, "--\(name)"] + positionals, [command] + positionals + ["--\(name)"]]
                }
                var parsedOnce = false
                for line in lines {
                    guard let fast = FastCommandLine.request(for: line) else { continue }
                    parsedOnce = true
                    XCTAssertEqual(fast, parsedByArgumentParser(line), "\(line)")
                }
                // A new option the fast parser does not know would send every line that uses it the slow way.
                XCTAssertTrue(parsedOnce, "folio \(command) --\(name) is not known to FastCommandLine")
            }
        }
    }

    func testTheLinesItDoesNotParseAreLeftToArgumentParser() {
        let lines: [[String]] = [
            [], ["status"], ["daemon"], ["--version"], ["help", "mirror"], ["mirror"], ["mirror", "src"],
            ["mirror", "src", "dst", "extra"], ["mirror", "--help"], ["mirror", "src", "dst", "-h"],
            ["mirror", "help", "dst"], ["mirror", "src", "dst", "--nosuch"], ["mirror", "src", "dst", "--json", "--json"],
            ["mirror", "src", "dst", "--timeout", "5", "--timeout", "6"], ["mirror", "src", "dst", "--json=true"],
            ["mirror", "src", "dst", "--timeout", "-1"], ["mirror", "src", "dst", "--transfers", "x"],
            ["mirror", "src", "dst", "--identity"], ["mirror", "src", "dst", "--identity", "--json"],
            ["mirror", "src", "dst", "--identity="], ["mirror", "src", "dst", "--requests-per-second", "fast"],
            ["mirror", "--", "src", "dst"], ["mirror", "-src", "dst"], ["mirror", "src", "-"],
            ["mirror", "src", "dst", "--generate-completion-script", "bash"], ["mirror", "src", "dst", "--experimental-dump-help"],
            ["sync", "--now", "--version"], ["sync", "--parallel-targets", "two"], ["sync", "--now", "--now"],
            ["sync", "--config"], ["sync", "-n"], ["sync", "help"],
        ]
        for line in lines {
            XCTAssertNil(FastCommandLine.request(for: line), "\(line)")
        }
    }

    /// The long options (name, whether it takes a value) that argument-parser's JSON description of the command
    /// lists, leaving out its own help and version flags.
    private func declaredOptions(of command: String) throws -> [(String, Bool)] {
        struct Tool: Decodable { var command: Command }
        struct Command: Decodable { var commandName: String; var arguments: [Argument]?; var subcommands: [Command]? }
        struct Argument: Decodable { var kind: String; var names: [Name]? }
        struct Name: Decodable { var kind: String; var name: String }
        let tool = try JSONDecoder().decode(Tool.self, from: Data(Folio._dumpHelp().utf8))
        let described = try XCTUnwrap(tool.command.subcommands?.first { $0.commandName == command })
        return (described.arguments ?? []).compactMap { argument in
            guard argument.kind != "positional", let long = argument.names?.first(where: { $0.kind == "long" }),
                  !["help", "version"].contains(long.name) else { return nil }
            return (long.name, argument.kind == "option")
        }
    }
}
