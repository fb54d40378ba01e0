import FolioCore

/// What an HTTP listing learned about its server, kept by the engine between runs (`Snapshot.memo`) so that the
/// next listing starts as this one ended, not from scratch: the words `depth-1` and `far`, space-separated.
/// Unknown words are ignored (a memo written by another Folio version).
struct HTTPListingMemo: Equatable {
    /// The WebDAV server refused `Depth: infinity`: the next listing asks `Depth: 1` from the start and lists
    /// the last run's folders ahead.
    var infinityRefused = false
    /// The link was far (`TargetConfig.isFar`): the next listing starts every worker at once.
    var far = false

    init(infinityRefused: Bool = false, far: Bool = false) {
        self.infinityRefused = infinityRefused
        self.far = far
    }

    /// Reads a stored memo; nil (none stored) reads as nothing learned.
    init(_ text: String?) {
        let words = Set((text ?? "").split(separator: " "))
        infinityRefused = words.contains("depth-1")
        far = words.contains("far")
    }

    /// The memo as stored.
    var text: String {
        [infinityRefused ? "depth-1" : nil, far ? "far" : nil].compactMap(\.self).joined(separator: " ")
    }
}
