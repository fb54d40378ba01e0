/// The validator and checksum of an entry that has either, kept behind one optional reference by `Entry` and
/// `RecordedEntry`: a local source has neither, and two optional strings inline cost 32 bytes an entry (6.4 MB
/// at 100,000 entries across the snapshot and the record) where one reference costs 8.
///
/// Immutable, so sharing it between copies of an entry, and between threads, is safe; a change makes a new one.
final class EntryTokens: Hashable, Sendable {
    let validator: String?
    let checksum: String?

    private init(validator: String?, checksum: String?) {
        self.validator = validator
        self.checksum = checksum
    }

    /// Tokens holding these values, or nil when there are none.
    static func make(validator: String?, checksum: String?) -> EntryTokens? {
        validator == nil && checksum == nil ? nil : EntryTokens(validator: validator, checksum: checksum)
    }

    static func == (lhs: EntryTokens, rhs: EntryTokens) -> Bool {
        lhs.validator == rhs.validator && lhs.checksum == rhs.checksum
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(validator)
        hasher.combine(checksum)
    }
}
