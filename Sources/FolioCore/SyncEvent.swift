/// What a run tells its observer (the progress display, the NDJSON writer, the daemon's log), in order.
public enum SyncEvent: Sendable {
    public enum Stage: String, Sendable {
        case listing, planning, removing, creating, downloading, finishing
    }

    /// What the plan will do, once it is known.
    public struct PlanSummary: Sendable {
        public var downloads: Int
        public var downloadBytes: Int64
        public var removals: Int
        public var folders: Int
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
