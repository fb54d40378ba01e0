import FolioCore
import Foundation

/// A `StateStore` in memory, for engine tests that do not exercise SQLite.
public final class MemoryStateStore: StateStore, Sendable {
    private struct Storage {
        var records: [String: [RelativePath: RecordedEntry]] = [:]
        var places: [String: (source: String, destination: String)] = [:]
        var digests: [String: UInt64] = [:]
        var memos: [String: String] = [:]
        var runs: [(target: String, result: RunReport.Result?)] = []
        var commits = 0
        var hookBacklog: [(run: Int64, target: String, paths: [RelativePath])] = []
    }

    private let storage = Locked(Storage())
    private let keepObserver = Locked<(@Sendable ([RelativePath]) throws -> Void)?>(nil)

    public init() {}

    /// Has `observer` see each batch of paths given to `keepChangesForHook`, before they are kept; what it throws
    /// fails the keep, as a state database that cannot be written does.
    public func observeKeptChanges(_ observer: (@Sendable ([RelativePath]) throws -> Void)?) {
        keepObserver.withLock { $0 = observer }
    }

    public func record(of target: String, sharingPathsWith snapshot: Snapshot) throws -> RecordedTree {
        storage.withLock { RecordedTree(Array(($0.records[target] ?? [:]).values)) }
    }

    public func recordedEntryCount(from source: String, in destination: String) throws -> Int {
        storage.withLock { storage in
            storage.places.filter { $0.value == (source, destination) }.keys.reduce(0) { $0 + (storage.records[$1]?.count ?? 0) }
        }
    }

    public func sourceDigest(of target: String) throws -> UInt64? {
        storage.withLock { $0.digests[target] }
    }

    public func beginRun(target: String, source: String, destination: String, trigger: TargetConfig.Trigger, startedAt: Date) throws -> Int64 {
        storage.withLock { storage in
            if storage.places[target] == nil { storage.places[target] = (source, destination) }
            storage.runs.append((target, nil))
            return Int64(storage.runs.count - 1)
        }
    }

    public func recordsAnotherTree(target: String, source: String, destination: String) throws -> Bool {
        storage.withLock { storage in storage.places[target].map { $0 != (source, destination) } ?? false }
    }

    public func startOver(target: String, source: String, destination: String) throws {
        storage.withLock { storage in
            // As the database does: the rows stay, without the old source's tokens.
            storage.records[target] = storage.records[target]?.mapValues { entry in
                var kept = entry
                kept.validator = nil
                kept.checksum = nil
                return kept
            }
            storage.digests[target] = nil
            storage.memos[target] = nil
            storage.hookBacklog.removeAll { $0.target == target }
            storage.places[target] = (source, destination)
        }
    }

    public func recordFailedStart(target: String, trigger: TargetConfig.Trigger, at startedAt: Date, error: String, refused: Bool) throws {
        storage.withLock { $0.runs.append((target, refused ? .refused : .failed)) }
    }

    public func commit(target: String, upserts: [RecordedEntry], removedSubtrees: [RelativePath]) throws {
        storage.withLock { storage in
            var record = storage.records[target] ?? [:]
            for path in removedSubtrees {
                for key in record.keys where key.isWithin(path) { record[key] = nil }
            }
            for upsert in upserts { record[upsert.path] = upsert }
            storage.records[target] = record
            storage.commits += 1
        }
    }

    public func finishRun(id: Int64, target: String, report: RunReport, sourceDigest: UInt64?, listingMemo: String?,
                          keepingChangesForHook: Bool) throws {
        storage.withLock { storage in
            storage.runs[Int(id)].result = report.result
            storage.digests[target] = sourceDigest
            if let listingMemo { storage.memos[target] = listingMemo }
            if !keepingChangesForHook { storage.hookBacklog.removeAll { $0.target == target } }
        }
    }

    public func keepChangesForHook(run: Int64, target: String, paths: [RelativePath]) throws {
        guard !paths.isEmpty else { return }
        try keepObserver.withLock { $0 }?(paths)
        storage.withLock { $0.hookBacklog.append((run, target, paths)) }
    }

    public func pendingHookChanges(of target: String, before run: Int64?) throws -> HookBacklog {
        storage.withLock { storage in
            var backlog = HookBacklog(runs: [], paths: [])
            var seen = Set<RelativePath>()
            for kept in storage.hookBacklog where kept.target == target && kept.run < run ?? Int64.max {
                if backlog.runs.last != kept.run { backlog.runs.append(kept.run) }
                backlog.paths += kept.paths.filter { seen.insert($0).inserted }
            }
            return backlog
        }
    }

    public func forgetHookChanges(_ backlog: HookBacklog) throws {
        storage.withLock { $0.hookBacklog.removeAll { backlog.runs.contains($0.run) } }
    }

    public func listingHints(of target: String) throws -> ListingHints {
        storage.withLock { storage in
            let folders = (storage.records[target] ?? [:]).values.filter { $0.kind == .folder }.map(\.path).sorted()
            return ListingHints(folders: folders, memo: storage.memos[target])
        }
    }

    public func listingMemo(of target: String) throws -> String? {
        storage.withLock { $0.memos[target] }
    }

    /// The results of the runs so far, oldest first.
    public var results: [RunReport.Result?] { storage.withLock { $0.runs.map(\.result) } }
}

/// Collects events for assertions.
public final class EventRecorder: SyncEventSink, Sendable {
    private let events = Locked<[SyncEvent]>([])

    public init() {}

    public func emit(_ event: SyncEvent) { events.withLock { $0.append(event) } }

    public var notices: [String] {
        events.withLock { list in
            list.compactMap { if case .notice(_, let message) = $0 { return message } else { return nil } }
        }
    }
}

extension StateStore {
    /// Ends a run and keeps the stored listing memo, as a run whose listing did not finish does.
    public func finishRun(id: Int64, target: String, report: RunReport, sourceDigest: UInt64?) throws {
        try finishRun(id: id, target: target, report: report, sourceDigest: sourceDigest, listingMemo: nil, keepingChangesForHook: false)
    }
}
