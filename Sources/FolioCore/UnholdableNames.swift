/// Source names that the destination's filesystem refuses to hold (`Destination.refusedNameBytes`,
/// `Destination.refusesNonUTF8Names`): FAT and exFAT, and an SMB share of a Windows server, take no `"`, `*`,
/// `:`, `<`, `>`, `?`, `\` or `|` in a name, and exFAT and FAT no name that is not UTF-8.
///
/// Why skip them before the run: each run fetched such a file into `.folio/partial`, failed to rename it into
/// place ("No such file or directory"), kept the partial (a film's whole size) and exited 3, every run, with a
/// line that named the wrong cause. Skipped, each has one line that says why and what to do, as a case clash has.
enum UnholdableNames {
    /// The snapshot without the entries whose names (or a folder's above them) the destination cannot hold, with
    /// one skipped issue for each name that is the first of its path the destination refuses.
    static func resolve(_ snapshot: Snapshot, refusing refused: Set<UInt8>, refusesNonUTF8: Bool, destination: String) -> Snapshot {
        guard !refused.isEmpty || refusesNonUTF8 else { return snapshot }
        func problem<Name: Collection<UInt8>>(_ name: Name) -> String? {
            if let byte = name.first(where: refused.contains) { return "\"\(Character(Unicode.Scalar(byte)))\" in a name" }
            if refusesNonUTF8, name.contains(where: { $0 >= 0x80 }), String(validating: name, as: UTF8.self) == nil { return "a name that is not UTF-8" }
            return nil
        }
        var kept: [Entry] = []
        var issues = snapshot.issues
        for entry in snapshot.entries {
            let components = entry.path.components
            guard let bad = components.firstIndex(where: { problem($0) != nil }) else {
                kept.append(entry)
                continue
            }
            // One line, for the name itself; what lies below a skipped folder goes with it, unsaid.
            if bad == components.count - 1, let why = problem(components[bad]) {
                issues.append(ListingIssue(path: entry.path.description, kind: .skipped(
                    "the filesystem of \(destination) cannot hold \(why) (FAT and exFAT cannot); rename it at the source, exclude it, or mirror to a filesystem that can (ext4, xfs, btrfs)")))
            }
        }
        guard kept.count < snapshot.entries.count else { return snapshot }
        var result = Snapshot(sortedEntries: kept, issues: issues)
        result.memo = snapshot.memo
        return result
    }
}
