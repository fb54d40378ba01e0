import Foundation

/// What the last run of a target left for the next listing of its source, from the state database.
///
/// Only hints: a source that uses them must list the same tree as without them, since the source may have
/// changed in any way since.
public struct ListingHints: Sendable, Equatable {
    /// The folders of the last run's record, in path order: a source that pays a round trip per folder can ask
    /// for them all at once instead of one level at a time.
    public var folders: [RelativePath]
    /// What the source said about its server in the last listing (`Snapshot.memo`), in the source's own words.
    public var memo: String?

    /// Hints with `folders` and `memo`; none by default (a first run).
    public init(folders: [RelativePath] = [], memo: String? = nil) {
        self.folders = folders
        self.memo = memo
    }

    /// Drops the folders `exclude` leaves out, and those inside them. Their records stay while the destination
    /// holds them (`LeftAlone.covers`), but listing them ahead would cost requests for entries the run leaves out.
    public mutating func dropFolders(excludedBy exclude: ExcludeFilter) {
        guard !exclude.isEmpty else { return }
        var dropped = Set<RelativePath>()
        // In path order, a folder comes after the folders above it, so one look at its parent is enough.
        folders.removeAll { folder in
            guard folder.parent.map(dropped.contains) == true || exclude.excludes(folder, isFolder: true) else { return false }
            dropped.insert(folder)
            return true
        }
    }

    /// How long a server's answer a source keeps in its memo (a refused request, a missing feature) is taken as
    /// known: after it, the source asks again, in case the server has changed.
    public static let answerDays = 7

    /// Today, in days since 1970 (UTC): the date a memo's answers carry.
    public static func today() -> Int {
        Int((Date().timeIntervalSince1970 / 86_400).rounded(.down))
    }

    /// The number in a memo's `name=NUMBER` word (a day, a count); nil for another word.
    public static func number(in word: Substring, after name: String) -> Int? {
        word.hasPrefix(name) ? Int(word.dropFirst(name.count)) : nil
    }

    /// Whether an answer given on `day` still holds on `today` (a clock set back asks again).
    public static func holds(_ day: Int?, today: Int) -> Bool {
        guard let day else { return false }
        return (0..<answerDays).contains(today - day)
    }
}
