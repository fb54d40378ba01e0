import Foundation

/// What the engine needs from the state database. `FolioState` implements it with SQLite.
///
/// Implementations are called from several threads and serialise writes themselves (one writer).
public protocol StateStore: Sendable {
    /// The last good record of a target: what Folio wrote, by path. A recorded path that `snapshot` also holds
    /// is the snapshot's path (one copy of the name in memory); the snapshot may be `.empty`.
    func record(of target: String, sharingPathsWith snapshot: Snapshot) throws -> RecordedTree
    /// How many entries the records of runs from `source` into `destination` hold, whatever the target's name
    /// (a renamed target takes its old record over at its first run: see `beginRun`); 0 when there is none.
    func recordedEntryCount(from source: String, in destination: String) throws -> Int
    /// The digest of the source snapshot of the target's last complete, successful run.
    func sourceDigest(of target: String) throws -> UInt64?
    /// Starts a run and returns its id. A new name for the source and destination of an existing record (a
    /// renamed target) takes it over. A target pointed at another source or destination keeps its record until
    /// the run starts it over (`startOver`).
    func beginRun(target: String, source: String, destination: String, trigger: TargetConfig.Trigger, startedAt: Date) throws -> Int64
    /// Whether the target's record is of another tree: it was last run from another source or into another folder.
    func recordsAnotherTree(target: String, source: String, destination: String) throws -> Bool
    /// Forgets what the target's record says of its old source's versions (validators, checksums), its source
    /// digest, listing memo and the hook paths of its old tree: it is now `source` mirrored into `destination`.
    /// The record's rows stay, for which local entries Folio wrote.
    func startOver(target: String, source: String, destination: String) throws
    /// Stores finished files and forgets removed paths (with everything below them), in one transaction.
    func commit(target: String, upserts: [RecordedEntry], removedSubtrees: [RelativePath]) throws
    /// Records, as one finished run, a run that failed before the engine could start it (its source could not be
    /// made, its folder could not be locked), so that `folio status` shows that failure, not the last success,
    /// and a restarted daemon tries the target again soon. Why not `beginRun` and `finishRun`: it is written
    /// without the folder's lock, so it must leave alone another process's run under way (which `beginRun`
    /// closes as interrupted), the target's record and its source digest.
    /// `refused`: a safety guard stopped it (recorded as refused, not failed).
    func recordFailedStart(target: String, trigger: TargetConfig.Trigger, at startedAt: Date, error: String, refused: Bool) throws
    /// Ends a run; `sourceDigest` is set only for a complete, successful run (else the stored one is cleared).
    /// A `listingMemo` replaces the stored one; nil keeps it. Without `keepingChangesForHook` (the target has no
    /// `on-change` hook any more), the paths kept for the target's hook are forgotten.
    func finishRun(id: Int64, target: String, report: RunReport, sourceDigest: UInt64?, listingMemo: String?, keepingChangesForHook: Bool) throws
    /// Keeps paths that run `run` of the target is about to change (install, remove, retime) for the target's
    /// `on-change` hook, until a hook has had them (`HookBacklog`). Durable before it returns: the files change
    /// after, so a run cut by `kill -9` or a power cut still hands its changes to a later run's hook. A path kept
    /// whose change then fails costs that hook a look at an unchanged path, no more.
    func keepChangesForHook(run: Int64, target: String, paths: [RelativePath]) throws
    /// The changed paths of the target's runs before `run` (all its runs with nil) that no hook has had yet,
    /// oldest first.
    func pendingHookChanges(of target: String, before run: Int64?) throws -> HookBacklog
    /// Forgets the runs' kept paths: a hook has had them.
    func forgetHookChanges(_ backlog: HookBacklog) throws
    /// The folders of a target's record and its last listing memo, for the next listing.
    func listingHints(of target: String) throws -> ListingHints
    /// A target's last listing memo alone (`listingHints` without the folders).
    func listingMemo(of target: String) throws -> String?
}

/// A state database that cannot be used: corrupt, newer than this Folio, unwritable. Fails the run (exit 1).
public struct StateError: Error, Sendable, CustomStringConvertible {
    /// One line for people: what is wrong with the database and, where there is one, the way out.
    public var message: String
    /// An error with `message`.
    public init(_ message: String) { self.message = message }
    /// The message alone.
    public var description: String { message }
}

extension StateStore {
    /// The last good record of a target: what Folio wrote, by path.
    public func record(of target: String) throws -> RecordedTree {
        try record(of: target, sharingPathsWith: .empty)
    }
}
