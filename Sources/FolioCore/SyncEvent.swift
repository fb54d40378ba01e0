/// What a run tells its observer (the progress display, the NDJSON writer, the daemon's log), in order.
public enum SyncEvent: Sendable {
    /// A stage of a run, in the order they come; the raw value is what progress displays show.
    public enum Stage: String, Sendable {
        case listing, planning, removing, creating, downloading, finishing
    }

    /// What the plan will do, once it is known.
    public struct PlanSummary: Sendable {
        /// Files to download.
        public var downloads: Int
        /// Their total size, in bytes.
        public var downloadBytes: Int64
        /// Entries to remove, a folder counting with everything below it.
        public var removals: Int
        /// Folders to create.
        public var folders: Int
        /// Files whose modification time alone is to be set.
        public var mtimeFixes: Int
    }

    case started(target: String, source: String, destination: String, trigger: TargetConfig.Trigger)
    case stage(target: String, stage: Stage)
    case planned(target: String, summary: PlanSummary)
    case fileDone(target: String, path: RelativePath, bytes: Int64)
    case fileFailed(target: String, path: RelativePath, message: String)
    /// Something the operator should read: listing issues, local changes moved to the trash, warnings.
    case notice(target: String, message: String)
    case finished(RunReport)
}

/// Receives a run's events. Called from the engine's task and from download worker threads.
public protocol SyncEventSink: Sendable {
    func emit(_ event: SyncEvent)
}
