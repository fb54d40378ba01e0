import FolioCore

/// What an SFTP listing learned about its server, kept by the engine between runs (`Snapshot.memo`) so that the
/// next listing starts as this one ended: space-separated words `no-commands=DAY` and `no-find=DAY`. Unknown
/// words are ignored (a memo written by another Folio version).
///
/// Why: on an SFTP-only account (no exec: chrooted hosting, many NAS) a no-change run is all listing, and a
/// small tree's listing is mostly the log-in. Knowing the server, the listing skips trying exec (4 round trips).
struct SFTPListingMemo: Equatable {
    /// The day (days since 1970, UTC) the server last refused to run a command. For a week after it
    /// (`ListingHints.answerDays`), the listing goes straight to readdir and small files are not asked of tar;
    /// then it tries again, in case the account was given a shell.
    var commandsRefusedOn: Int?
    /// The day the server ran commands but the exec listing could not list (no GNU find, or a root a shell
    /// cannot reach). For a week after it, the listing goes straight to readdir.
    var findUnusableOn: Int?

    /// Nothing learned yet.
    init() {}

    /// Reads a stored memo; nil (none stored) reads as nothing learned.
    init(_ text: String?) {
        for word in (text ?? "").split(separator: " ") {
            commandsRefusedOn = ListingHints.number(in: word, after: "no-commands=") ?? commandsRefusedOn
            findUnusableOn = ListingHints.number(in: word, after: "no-find=") ?? findUnusableOn
        }
    }

    /// Whether the listing on `today` should take exec as refused.
    func refusesCommands(today: Int) -> Bool { ListingHints.holds(commandsRefusedOn, today: today) }

    /// Whether the listing on `today` should skip the exec listing and go straight to readdir.
    func skipsExec(today: Int) -> Bool { refusesCommands(today: today) || ListingHints.holds(findUnusableOn, today: today) }

    /// The memo as stored.
    var text: String {
        [commandsRefusedOn.map { "no-commands=\($0)" }, findUnusableOn.map { "no-find=\($0)" }]
            .compactMap(\.self).joined(separator: " ")
    }
}
