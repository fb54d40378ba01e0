import FolioCore
import Foundation
import FolioTestSupport
import XCTest

final class ConfigTests: XCTestCase {
    func testExampleConfigParses() throws {
        let example = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../config/folio.example.toml").standardized.path
        let config = try Config.load(path: example)
        XCTAssertFalse(config.targets.isEmpty)
        let photos = try XCTUnwrap(config.targets.first { $0.name == "photos" })
        XCTAssertEqual(photos.interval, 15 * 60)
        XCTAssertEqual(photos.exclude, ["*.tmp", "Thumbs.db", ".cache/"])
        XCTAssertEqual(config.warnings, [], "the example sets only what each source uses")
    }

    func testDefaultsAndTargetKeys() throws {
        let config = try Config.parse("""
            state-dir = "/var/lib/folio-test"
            transfers = 8
            max-delete = 100
            interval = "2h"
            bandwidth-limit = "2M"

            [[target]]
            name = "music"
            source = "sftp://nas.local:2222/srv/music"
            destination = "/srv/music"
            mode = "automatic"
            identity = "/etc/folio/id_ed25519"
            symlinks = "follow"

            [[target]]
            name = "site"
            source = "https://example.org/files/"
            destination = "/srv/site"
            transfers = 2
            max-delete = "10%"
            webdav = false
            requests-per-second = 2.5
            connections = 4
            bandwidth-limit = "off"
            """, file: "f.toml")
        XCTAssertEqual(config.targets[0].bandwidthLimit, BandwidthLimit(bytesPerSecond: 2 << 20), "the default")
        XCTAssertNil(config.targets[1].bandwidthLimit, "lifted by the target")
        XCTAssertEqual(config.stateDirectory, "/var/lib/folio-test")
        XCTAssertEqual(config.targets[0].transfers, 8)
        XCTAssertEqual(config.targets[0].maxDelete, .count(100))
        XCTAssertEqual(config.targets[0].interval, 7_200)
        XCTAssertEqual(config.targets[0].mode, .automatic)
        XCTAssertEqual(config.targets[0].symlinks, .follow)
        XCTAssertEqual(config.targets[0].sourceSettings.identity, "/etc/folio/id_ed25519")
        XCTAssertEqual(config.targets[1].transfers, 2)
        XCTAssertEqual(config.targets[1].maxDelete, .percent(10))
        XCTAssertEqual(config.targets[1].sourceSettings.webdav, false)
        XCTAssertEqual(config.targets[1].sourceSettings.requestsPerSecond, 2.5)
        XCTAssertEqual(config.targets[1].sourceSettings.connections, 4)
        XCTAssertNil(config.targets[0].sourceSettings.connections)

        // Floats with an exponent, as TOML allows (and as `folio mirror --requests-per-second 0.00001` writes one).
        for (text, rate) in [("1e-05", 0.00001), ("2.5E1", 25.0), ("5e0", 5.0)] {
            let small = try Config.parse("[[target]]\nname = \"t\"\nsource = \"https://example.org/\"\ndestination = \"/srv/t\"\nrequests-per-second = \(text)\n", file: "f.toml")
            XCTAssertEqual(small.targets[0].sourceSettings.requestsPerSecond, rate, text)
        }
    }

    /// Every mistake names file:line, the key, and what to write instead.
    func testMistakesSayWhereAndWhatToWrite() {
        let base = "[[target]]\nname = \"a\"\nsource = \"/src\"\ndestination = \"/dst\"\n"
        let web = "[[target]]\nname = \"w\"\nsource = \"https://nas.lan/share/\"\ndestination = \"/dst\"\n"
        let rows: [(text: String, expected: String)] = [
            (base + "destinaton = \"/x\"\n", "f.toml:5: unknown key \"destinaton\"; did you mean \"destination\"?"),
            (base + "transfers = \"4\"\n", "f.toml:5: transfers must be a whole number from 1 to 64"),
            (base + "connections = 0\n", "f.toml:5: connections must be a whole number from 1 to 64"),
            (base + "interval = 90\n", "f.toml:5: interval must be a string, not an integer; write it with a unit, e.g. interval = \"15m\""),
            (base + "interval = \"soon\"\n", "f.toml:5: interval \"soon\" is not a duration; write e.g. \"90s\", \"15m\", \"2h\" or \"1d\""),
            (base + "interval = \"0s\"\n", "f.toml:5: interval \"0s\" is shorter than a second; write at least \"1s\""),
            (base + "on-change-timeout = \"0s\"\n", "f.toml:5: on-change-timeout \"0s\" is shorter than a second; write at least \"1s\""),
            (base + "mode = \"sometimes\"\n", "f.toml:5: mode must be \"manual\", \"automatic\" or \"both\""),
            (base + "max-delete = \"lots\"\n", "f.toml:5: max-delete is a count (max-delete = 100) or a percentage (max-delete = \"50%\")"),
            (base + "max-delete = \"150%\"\n", "f.toml:5: max-delete \"150%\" is more than all entries; write a percentage from \"0%\" to \"100%\", or a count"),
            (base + "on-change = \"echo hi\"\n", "f.toml:5: on-change must be a list of strings, e.g. [\"/usr/local/bin/refresh\", \"{target}\"]"),
            (base + base, "f.toml:6: target name \"a\" is already used at line 2; give each target its own name"),
            ("[[target]]\nname = \"Bad Name\"\n", "f.toml:2: target name \"Bad Name\" may use only a-z, 0-9, '.', '_' and '-'"),
            ("[[target]]\nname = \"a\"\nsource = \"/data\"\ndestination = \"/data/mirror\"\n",
             "f.toml:4: target \"a\": destination /data/mirror is inside its source /data; choose a destination outside it"),
            ("[[target]]\nname = \"a\"\nsource = \"/data/\"\ndestination = \"/data\"\n",
             "f.toml:4: target \"a\": destination /data is its source; choose a destination outside it"),
            (base + "[[target]]\nname = \"b\"\nsource = \"/other\"\ndestination = \"/dst/b\"\n",
             "f.toml:8: target \"b\": destination /dst/b is inside target \"a\"'s destination /dst; give each target a folder of its own"),
            (base + "[[target]]\nname = \"b\"\nsource = \"/other\"\ndestination = \"/dst\"\n",
             "f.toml:8: target \"b\": destination /dst is also target \"a\"'s destination /dst; give each target a folder of its own"),
            (base + "enabled = yes\n", "f.toml:5: unknown value yes; TOML writes yes and no as true and false (no quotes)"),
            (base + "identity = \"C:\\Users\\ann\"\n", "f.toml:5: \\U in a string starts a Unicode escape; for a backslash (a Windows path), write \\\\ or put the text in single quotes"),
            (base + "transfers = 4\ntransfers = 8\n", "f.toml:6: key transfers is set twice in the same table (first on line 5); keep one"),
            ("[[target]]\nname = \"a\"\n", "f.toml:1: this [[target]] has no source; add source = \"…\""),
            (base + "destination2 = \n", "f.toml:5: expected a value"),
            ("[target]\n", "f.toml:1: unknown table [target]; targets are written [[target]]"),
            (base + "bandwidth-limit = \"fast\"\n", "f.toml:5: bandwidth-limit is a rate of at least 1 KiB/s: a number in KiB/s (500) or with a unit (\"500K\", \"2M\", \"1.5MiB/s\"), or \"off\""),
            (base + "bandwidth-limit = 0\n", "f.toml:5: bandwidth-limit is a rate of at least 1 KiB/s: a number in KiB/s (500) or with a unit (\"500K\", \"2M\", \"1.5MiB/s\"), or \"off\""),
            ("[target.photos]\nsource = \"/x\"\n", "f.toml:1: targets are written [[target]] with name = \"…\" inside, not [target.NAME]"),
            ("[defaults.x]\n", "f.toml:1: dotted table names ([defaults.…]) are not used in this file"),
            ("name = \"x\"\n", "f.toml:1: name belongs in a [[target]] table"),
            (base + "source2 = \"x\" junk\n", "f.toml:5: unexpected text after the value; one key per line"),
            (web + "password-file = \"/etc/folio/pw\"\n", "f.toml:5: target \"w\": password-file is set but username is not; add username"),
            (web + "username = \"ann\"\n", "f.toml:5: target \"w\": username is set but password-file is not; add password-file, the path of a file holding the password"),
            (web + "username = \"ann\"\npassword-file = \"/p\"\ntoken-file = \"/t\"\n",
             "f.toml:7: target \"w\": token-file is set together with username or password-file; use one: a bearer token, or a user name and its password"),
            (base + "exclude = [\"a\u{1B}[31mb\"]\n", "f.toml:5: a string holds the control character \\x1b; remove it"),
            (base + "exclude = [\'a\u{0}b\']\n", "f.toml:5: a string holds the control character \\x00; remove it"),
            (base + "on-change = [\"/bin/x\", \"a\\u0007b\"]\n", "f.toml:5: on-change holds the control character \\x07; remove it"),
            ("[[target]]\nname = \"a\"\nsource = \"/src\\u001b[2J\"\n", "f.toml:3: source holds the control character \\x1b; remove it"),
            (base + "transfers = 99999999999999999999\n", "f.toml:5: number 99999999999999999999 is too large"),
            ("[[target]]\nname = \"a\"\nsource = \"sftp://user:pw@host/x\"\n", "f.toml:3: source URL contains a password; put the password in a file only this user can read and give that file as password-file (folio mirror: --password-file)"),
        ]
        for row in rows {
            XCTAssertThrowsError(try Config.parse(row.text, file: "f.toml"), row.expected) { error in
                XCTAssertEqual((error as? ConfigError)?.description, row.expected)
            }
        }
    }

    /// A source setting that the target's kind of source does not use is kept (the file still loads) and named in
    /// a warning; one set at the top level as a default is not (it serves the targets that use it).
    func testSourceSettingsTheSourceDoesNotUseAreWarnedAbout() throws {
        let config = try Config.parse("""
            known-hosts = "/etc/folio/known_hosts"

            [[target]]
            name = "local"
            source = "/mnt/nas/photos"
            destination = "/srv/photos"
            identity = "/etc/folio/id_ed25519"
            password-file = "secrets_pw"

            [[target]]
            name = "web"
            source = "https://files.example.org/kiosk/"
            destination = "/srv/kiosk"
            known-hosts = "/etc/folio/known_hosts"
            username = "kiosk"
            password-file = "secrets_pw"

            [[target]]
            name = "nas"
            source = "sftp://nas.local/music"
            destination = "/srv/music"
            identity = "/etc/folio/id_ed25519"
            webdav = false
            """, file: "/etc/folio/folio.toml")
        XCTAssertEqual(config.targets.count, 3)
        XCTAssertEqual(config.warnings, [
            "/etc/folio/folio.toml:7: target \"local\": identity is not used with a local folder, this target's source; remove it, or check that it is in the right target",
            "/etc/folio/folio.toml:8: target \"local\": password-file is not used with a local folder, this target's source; remove it, or check that it is in the right target",
            "/etc/folio/folio.toml:14: target \"web\": known-hosts is not used with an http(s):// server, this target's source; remove it, or check that it is in the right target",
            "/etc/folio/folio.toml:23: target \"nas\": webdav is not used with an sftp:// server, this target's source; remove it, or check that it is in the right target",
        ])
    }

    /// An exclude pattern whose `[` no `]` closes loads (it loaded before), with a warning that says what it matches.
    func testAnExcludePatternWithAnUnclosedSetIsWarnedAbout() throws {
        let config = try Config.parse("""
            [[target]]
            name = "photos"
            source = "/mnt/nas/photos"
            destination = "/srv/photos"
            exclude = ["*.[jJ]pg", "*.[tTmp", "\\\\[draft]*", "*.[rR]aw"]

            [[target]]
            name = "music"
            source = "/mnt/nas/music"
            destination = "/srv/music"
            exclude = ["*.[mM]3u"]
            """, file: "/etc/folio/folio.toml")
        XCTAssertEqual(config.targets[0].exclude, ["*.[jJ]pg", "*.[tTmp", "\\[draft]*", "*.[rR]aw"])
        XCTAssertEqual(config.warnings, [
            #"/etc/folio/folio.toml:5: target "photos": exclude pattern "*.[tTmp" has a "[" that no "]" closes, so it matches a "[" in names; close the set, or write "\\[" for a literal "[""#,
        ])
    }

    /// A file saved with Windows line ends loads, and a tab stays in a string: the only control characters TOML
    /// allows there (and line breaks in a multi-line string).
    func testWindowsLineEndsAndTabsLoad() throws {
        let config = try Config.parse("[[target]]\r\nname = \"a\"\r\nsource = \"/src\"\r\ndestination = \"/dst\"\r\non-change = [\"/bin/echo\", \"a\tb\"]\r\n", file: "f.toml")
        XCTAssertEqual(config.targets.map(\.destination), ["/dst"])
        // A hook's script of several lines, and a disabled target's half log-in, load too.
        let script = try Config.parse("""
            [[target]]
            name = "a"
            source = "https://nas.lan/share/"
            destination = "/dst"
            enabled = false
            username = "ann"
            on-change = ["/bin/sh", "-c", \"\"\"
            echo one
            echo two\"\"\"]
            """, file: "f.toml")
        XCTAssertEqual(script.targets.first?.onChange.last, "echo one\necho two")
    }

    /// A configuration handed over in a pipe (`--config <(…)`) loads; `/dev/null` is a file without targets, and a
    /// folder or a missing file says which it is.
    func testConfigurationsFromPipesAndDevicesLoadAndOtherPathsSayWhatTheyAre() throws {
        let pipe = FixtureTree.pipe(holding: "[[target]]\nname = \"p\"\nsource = \"/src\"\ndestination = \"/dst\"\n")
        defer { close(pipe.fd) }
        XCTAssertEqual(try Config.load(path: pipe.path).targets.map(\.name), ["p"])

        XCTAssertEqual(try Config.load(path: "/dev/null").targets, [])
        XCTAssertThrowsError(try Config.load(path: "")) {
            XCTAssertEqual(($0 as? ConfigError)?.description, "--config \"\": names no file; give the configuration file's path")
        }
        let folder = TemporaryDirectory("config")
        for (path, expected) in [
            (folder.path, "\(folder.path): this is a folder, not a configuration file; pass --config FILE with the file's path"),
            (folder.path("none.toml"), "\(folder.path("none.toml")): no configuration file here; copy config/folio.example.toml there, or pass --config FILE"),
        ] {
            XCTAssertThrowsError(try Config.load(path: path)) { XCTAssertEqual(($0 as? ConfigError)?.description, expected) }
        }
    }

    /// A file saved with a byte-order mark (Notepad's UTF-8) loads; it said "expected a key name" of line 1. A
    /// file in another encoding names the first line that is not UTF-8.
    func testAByteOrderMarkIsPassedOverAndALineNotInUTF8IsNamed() throws {
        let folder = TemporaryDirectory("config-encoding")
        let marked = folder.path("bom.toml")
        XCTAssertTrue(FileManager.default.createFile(atPath: marked, contents: Data([0xEF, 0xBB, 0xBF] + Array("[[target]]\nname = \"a\"\nsource = \"/src\"\ndestination = \"/dst\"\n".utf8))))
        XCTAssertEqual(try Config.load(path: marked).targets.map(\.name), ["a"])
        let latin1 = folder.path("latin1.toml")
        XCTAssertTrue(FileManager.default.createFile(atPath: latin1, contents: Data(Array("[[target]]\nname = \"caf".utf8) + [0xE9] + Array("\"\n".utf8))))
        XCTAssertThrowsError(try Config.load(path: latin1)) {
            XCTAssertEqual(($0 as? ConfigError)?.description, "\(latin1):2: this line is not UTF-8 text; save the file as UTF-8")
        }
    }

    func testDurations() {
        XCTAssertEqual(DurationText.seconds("90s"), 90)
        XCTAssertEqual(DurationText.seconds("15m"), 900)
        XCTAssertEqual(DurationText.seconds("1h30m"), 5_400)
        XCTAssertEqual(DurationText.seconds("1d"), 86_400)
        XCTAssertNil(DurationText.seconds("15"))
        XCTAssertNil(DurationText.seconds("m"))
        XCTAssertNil(DurationText.seconds("1x"))
    }

    func testSourceLocations() throws {
        XCTAssertEqual(try SourceLocation(parsing: "sftp://me@nas:2222/srv/My%20Music").kind, .sftp(user: "me", host: "nas", port: 2222, path: "/srv/My Music"))
        XCTAssertEqual(try SourceLocation(parsing: "file:///mnt/share").kind, .local("/mnt/share"))
        XCTAssertEqual(try SourceLocation(parsing: "https://h/a%23b/").kind, .http(secure: true, host: "h", port: 443, path: "/a#b/", url: "https://h/a%23b/"))
        XCTAssertThrowsError(try SourceLocation(parsing: "sftp://h/a%2Fb"))
        XCTAssertThrowsError(try SourceLocation(parsing: "ftp://h/x"))
        XCTAssertThrowsError(try SourceLocation(parsing: "relative/path"))
        XCTAssertEqual(try SourceLocation(parsing: "sftp://[::1]:2222/srv").kind, .sftp(user: nil, host: "::1", port: 2222, path: "/srv"))
        for (text, message) in [("sftp://[::1]:99999/x", "bad port in sftp://[::1]:99999/x; write [address]:port with a number from 1 to 65535"),
                                ("sftp://[::1]:0/x", "bad port in sftp://[::1]:0/x; write [address]:port with a number from 1 to 65535"),
                                ("sftp://[::1]x/y", "source sftp://[::1]x/y has text after its host's ]; write [address]:port"),
                                // A password with a / ends the authority early; no message may show any of it.
                                ("https://user:S3cret/PW@127.0.0.1/path/", "bad port in https://…@127.0.0.1/path/; write host:port with a number from 1 to 65535"),
                                ("sftp://[me:pa/ss@host/x", "source sftp://…@host/x has a host with an unclosed ["),
                                ("https://me:pa/s%zz@host/", "source https://…@host/ has a bad %-escape or encodes / or NUL in its path"),
                                ("https://h/src/%2e%2e/", "source https://h/src/%2e%2e/ has . or .. in its path; write the folder's path without them"),
                                ("http://h/a/../../etc/", "source http://h/a/../../etc/ has . or .. in its path; write the folder's path without them"),
                                ("me:secret@nas:/srv", "source \"…@nas:/srv\" is neither an absolute path nor a URL; write /path, sftp://host/path or https://host/path")] {
            XCTAssertThrowsError(try SourceLocation(parsing: text), text) { error in
                XCTAssertEqual((error as? SourceLocation.ParseError)?.message, message)
            }
        }
    }
}
