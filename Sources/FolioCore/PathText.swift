import Foundation
import Glibc

/// Path helpers for the checks that keep a destination and its source apart.
public enum PathText {
    /// `path` made absolute-looking without `.`, `..` or repeated slashes, by its text alone (for configuration
    /// checks, which must not depend on what exists yet).
    public static func normalized(_ path: String) -> String {
        var parts: [Substring] = []
        for part in path.split(separator: "/") where part != "." {
            if part == ".." { _ = parts.popLast() } else { parts.append(part) }
        }
        return "/" + parts.joined(separator: "/")
    }

    /// The name of the user running Folio (its uid where the password database has none), for lines that say who
    /// needs access to what. Looked up once: each lookup reads the password database, and a tree with many
    /// unreadable folders names the user on each one's line.
    public static let userName: String = getpwuid(geteuid()).flatMap { String(validatingCString: $0.pointee.pw_name) } ?? "uid \(geteuid())"

    /// `path` with a leading `~/` read as the home folder of the user running Folio, from the password database
    /// (not `$HOME`, as ssh finds `~/.ssh`).
    public static func expandingHome(_ path: String) -> String {
        guard path.hasPrefix("~/") else { return path }
        guard let entry = getpwuid(geteuid()) else { return "/" + path.dropFirst(2) }
        return String(cString: entry.pointee.pw_dir) + path.dropFirst(1)
    }

    /// A path as given on the command line, made absolute: a leading `~/` is the home folder (a shell leaves
    /// `--identity=~/.ssh/key` as it is), anything else not absolute is from the working folder.
    public static func fromCommandLine(_ path: String) -> String {
        let expanded = expandingHome(path)
        return expanded.hasPrefix("/") ? expanded : FileManager.default.currentDirectoryPath + "/" + expanded
    }

    /// Whether `path` is `folder` or below it (both normalized).
    public static func isWithin(_ path: String, _ folder: String) -> Bool {
        path == folder || folder == "/" || path.hasPrefix(folder + "/")
    }

    /// The real path of `path` (relative to the working folder): symlinks resolved in the part that exists, the
    /// rest normalized by its text. Two spellings of one folder, through links or not, give one answer.
    ///
    /// Why the text goes to `realpath` as it is: `link/..` is the parent of the link's target, as the kernel
    /// reads it. (Foundation's `standardizedFileURL`, used before, reads it so too where the link exists, but
    /// says nothing of it; `realpath` is the kernel's own answer.)
    ///
    /// A link to a folder not made yet (a destination's first run) is followed by its text: it names where the
    /// folder will be, and two targets writing there through it would share one folder.
    public static func real(_ path: String) -> String {
        var existing = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
        var rest: [Substring] = []
        var linksFollowed = 0
        while true {
            if let resolved = realpath(existing, nil) {
                defer { free(resolved) }
                return normalized(([Substring(String(cString: resolved))] + rest).joined(separator: "/"))
            }
            guard existing != "/", let slash = existing.lastIndex(of: "/") else { return normalized(existing) }
            // 40, as the kernel's own limit on links in one lookup (ELOOP): a loop of links ends here.
            if linksFollowed < 40, let target = try? FileManager.default.destinationOfSymbolicLink(atPath: existing) {
                linksFollowed += 1
                existing = target.hasPrefix("/") ? target : (slash == existing.startIndex ? "" : String(existing[..<slash])) + "/" + target
                continue
            }
            rest.insert(existing[existing.index(after: slash)...], at: 0)
            existing = slash == existing.startIndex ? "/" : String(existing[..<slash])
        }
    }
}
