import FolioCore
import Foundation

/// What an HTTP listing learned about its server, kept by the engine between runs (`Snapshot.memo`) so that the
/// next listing starts as this one ended, not from scratch: space-separated words, `depth-1=DAY` and `far`.
/// Unknown words are ignored (a memo written by another Folio version).
struct HTTPListingMemo: Equatable {
    /// The day (days since 1970, UTC) the WebDAV server last refused `Depth: infinity`. For a week after it, the
    /// listing asks `Depth: 1` from the start and lists the last run's folders ahead; then it asks again, in
    /// case the server has changed its mind.
    var infinityRefusedOn: Int?
    /// The link was far (`TargetConfig.isFar`): the next listing starts every worker at once.
    var far = false

    /// How long a refusal of `Depth: infinity` is taken as the server's answer.
    static let infinityRefusalDays = 7

    init(infinityRefusedOn: Int? = nil, far: Bool = false) {
        self.infinityRefusedOn = infinityRefusedOn
        self.far = far
    }

    /// Reads a stored memo; nil (none stored) reads as nothing learned.
    init(_ text: String?) {
        for word in (text ?? "").split(separator: " ") {
            if word == "far" {
                far = true
            } else if word.hasPrefix("depth-1="), let day = Int(word.dropFirst("depth-1=".count)) {
                infinityRefusedOn = day
            }
        }
    }

    /// Whether the listing on `today` should take the server's refusal of `Depth: infinity` as known.
    func refusesInfinity(today: Int) -> Bool {
        guard let day = infinityRefusedOn else { return false }
        return (0..<Self.infinityRefusalDays).contains(today - day)
    }

    /// The memo as stored.
    var text: String {
        [infinityRefusedOn.map { "depth-1=\($0)" }, far ? "far" : nil].compactMap(\.self).joined(separator: " ")
    }

    /// Today, in days since 1970 (UTC).
    static func today() -> Int {
        Int((Date().timeIntervalSince1970 / 86_400).rounded(.down))
    }
}
