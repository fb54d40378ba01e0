/// Source names that a destination ignoring case (`Destination.ignoresCase`: exFAT, FAT, an SMB share of a Windows
/// server, ext4 with casefold) cannot hold side by side: `A.txt` and `a.txt`, `Photos/` and `photos/`.
///
/// Why it matters: written one after the other, the second would replace the first under the first's name, and
/// every later run would find the "other" one changed and trade them again, each time through the trash. So of
/// each clashing group one name is mirrored and the others are skipped, each with a line that says why and what
/// to do, the way Syncthing reports a case conflict.
enum CaseClashes {
    /// The snapshot without the names that clash once case is ignored (and everything inside a skipped folder),
    /// with one skipped issue for each. Of a group the name the destination already holds is kept, so a new
    /// twin at the source never trades places with the copy in use; otherwise the first in path order.
    static func resolve(_ snapshot: Snapshot, local: [LocalItem], destination: String) -> Snapshot {
        let entries = snapshot.entries
        let keys = entries.map { $0.path.withBytes { fold($0) } }
        let reserved = fold(SyncPlanner.reservedName)
        var seen = Set<[UInt8]>(minimumCapacity: entries.count)
        let clashes = zip(entries, keys).contains { entry, key in
            !seen.insert(key).inserted || (key == reserved && entry.path.bytes != SyncPlanner.reservedName)
        }
        guard clashes else { return snapshot }

        func heldLocally(_ index: Int) -> Bool {
            entries[index].path.withBytes { bytes in local.index(ofPath: bytes) { $0.path } } != nil
        }
        // Shallowest first: a folder's fate is settled before its entries are looked at, so a folder that loses
        // takes its whole subtree with it, and the winner of a group can still change before anything below it
        // is decided.
        let order = entries.indices.sorted { entries[$0].path.depth != entries[$1].path.depth ? entries[$0].path.depth < entries[$1].path.depth : $0 < $1 }
        var kept = [Bool](repeating: true, count: entries.count)
        var lostToTwin: [Int] = []
        var winners: [[UInt8]: Int] = [:]
        for index in order {
            let path = entries[index].path
            if let parent = path.parent, !parent.isRoot,
               let parentIndex = parent.withBytes({ bytes in entries.index(ofPath: bytes) { $0.path } }), !kept[parentIndex] {
                kept[index] = false
                continue
            }
            if keys[index] == reserved && path.depth == 1 {
                // `.folio` itself is the planner's to skip; `.FOLIO` would land on it here.
                if path.bytes != SyncPlanner.reservedName {
                    kept[index] = false
                    lostToTwin.append(index)
                }
                continue
            }
            guard let winner = winners[keys[index]] else {
                winners[keys[index]] = index
                continue
            }
            if heldLocally(index) && !heldLocally(winner) {
                kept[winner] = false
                lostToTwin.append(winner)
                winners[keys[index]] = index
            } else {
                kept[index] = false
                lostToTwin.append(index)
            }
        }

        var issues = snapshot.issues
        for index in lostToTwin.sorted() {
            let path = entries[index].path
            let twin = winners[keys[index]].map { entries[$0].path.description } ?? ".folio, where Folio keeps its own files"
            issues.append(ListingIssue(path: path.description, kind: .skipped(
                "differs only in case from \(twin), and the filesystem of \(destination) does not tell case apart; rename one of them at the source, or mirror to a filesystem that keeps case (ext4, xfs, btrfs)")))
        }
        var result = Snapshot(sortedEntries: entries.indices.filter { kept[$0] }.map { entries[$0] }, issues: issues)
        result.memo = snapshot.memo
        return result
    }

    /// The path as a filesystem that ignores case surely sees it: a letter and its one-letter upper case are one
    /// (`é` and `É`), where that upper case has the letter as its own lower case. Why that narrow: exFAT's upcase
    /// table keeps apart the letters whose upper case leads elsewhere (`ı` and `i`, `ſ` and `s`, `µ` and `μ`,
    /// `ǅ` and `ǆ`), and skipping a name the filesystem could hold would leave it out of the mirror for nothing.
    /// A pair that a filesystem folds beyond this (exFAT takes `ς` for `σ`) is still refused, at install, by
    /// `Destination.moveIntoPlace`: the second name to arrive fails with a line and neither is traded. Not
    /// normalised: those filesystems keep NFC and NFD apart. Bytes that are not UTF-8 are kept as they are.
    static func fold<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> [UInt8] {
        if !bytes.contains(where: { $0 >= 0x80 }) {
            return bytes.map { $0 >= 0x61 && $0 <= 0x7A ? $0 & ~0x20 : $0 }
        }
        guard let text = String(validating: bytes, as: UTF8.self) else { return Array(bytes) }
        var folded = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            let upper = scalar.properties.uppercaseMapping.unicodeScalars
            if upper.count == 1, let capital = upper.first,
               capital == scalar || capital.properties.lowercaseMapping.unicodeScalars.elementsEqual([scalar]) {
                folded.append(capital)
            } else {
                folded.append(scalar)
            }
        }
        return Array(String(folded).utf8)
    }
}
