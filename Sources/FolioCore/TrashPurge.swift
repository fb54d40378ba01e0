/// What one purge of a destination's trash did: the earlier runs' folders it removed, those it could not remove
/// (with why), and why it could not record a folder's age, so that a run says so rather than deleting or keeping
/// files without a word.
struct TrashPurge: Sendable {
    /// Run folders removed whole.
    var removed = 0
    /// The first error of each run folder that could not be removed (a folder inside it that this user may not
    /// write, say); what it could remove of it is gone.
    var failures: [String] = []
    /// Why the time a run folder was first seen could not be recorded (`.folio/trash-clock` cannot be made or
    /// written): such a folder is kept past `trash-days`, at every run, until it can be.
    var unrecorded: String?

    /// Runs `removal`, counting it or keeping its error.
    mutating func remove(_ removal: () throws(SourceError) -> Void) {
        do {
            try removal()
            removed += 1
        } catch {
            failures.append(error.message)
        }
    }

    /// The lines a run prints about it: none when it did nothing.
    func notices(trash: String, trashDays: Int) -> [String] {
        var lines: [String] = []
        if removed > 0 {
            let age = trashDays == 0 ? "trash-days = 0" : "kept \(trashDays) \(trashDays == 1 ? "day" : "days")"
            lines.append("emptied the trash of \(removed == 1 ? "1 earlier run" : "\(removed) earlier runs") from \(trash) (\(age))")
        }
        lines += failures
        if let unrecorded {
            lines.append("run folders in \(trash) are kept past trash-days until the time each was made can be recorded: \(unrecorded)")
        }
        return lines
    }
}
