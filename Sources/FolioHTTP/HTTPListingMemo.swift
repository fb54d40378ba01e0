import FolioCore
import Foundation

/// What an HTTP listing learned about its server, kept by the engine between runs (`Snapshot.memo`) so that the
/// next listing starts as this one ended, not from scratch: space-separated words, `depth-1=DAY`, `index=DAY`
/// and `far`.
/// Unknown words are ignored (a memo written by another Folio version).
struct HTTPListingMemo: Equatable {
    /// The day (days since 1970, UTC) the WebDAV server last refused `Depth: infinity`. For a week after it, the
    /// listing asks `Depth: 1` from the start and lists the last run's folders ahead; then it asks again, in
    /// case the server has changed its mind.
    var infinityRefusedOn: Int?
    /// The day (days since 1970, UTC) `webdav = "auto"` last found a plain web server (no WebDAV). For a week
    /// after it, the listing reads the index pages without asking PROPFIND first; then it asks again.
    var plainOn: Int?
    /// The link was far (`TargetConfig.isFar`): the next listing starts every worker at once.
    var far = false

    init(infinityRefusedOn: Int? = nil, plainOn: Int? = nil, far: Bool = false) {
        self.infinityRefusedOn = infinityRefusedOn
        self.plainOn = plainOn
        self.far = far
    }

    /// Reads a stored memo; nil (none stored) reads as nothing learned.
    init(_ text: String?) {
        for word in (text ?? "").split(separator: " ") {
            if word == "far" { far = true }
            infinityRefusedOn = ListingHints.number(in: word, after: "depth-1=") ?? infinityRefusedOn
            plainOn = ListingHints.number(in: word, after: "index=") ?? plainOn
        }
    }

    /// Whether the listing on `today` should take the server's refusal of `Depth: infinity` as known.
    func refusesInfinity(today: Int) -> Bool {
        ListingHints.holds(infinityRefusedOn, today: today)
    }

    /// Whether the listing on `today` should take the server for a plain one (index pages, no WebDAV).
    func isPlain(today: Int) -> Bool {
        ListingHints.holds(plainOn, today: today)
    }

    /// The memo as stored.
    var text: String {
        [infinityRefusedOn.map { "depth-1=\($0)" }, plainOn.map { "index=\($0)" }, far ? "far" : nil]
            .compactMap(\.self).joined(separator: " ")
    }
}
