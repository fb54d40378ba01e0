/// The changed paths that runs of a target kept for its `on-change` hook and that no hook has had yet: a run
/// stopped by SIGTERM or Ctrl-C skips its hook, a process can end between a run and its hook, and one killed or
/// cut by a power failure ends mid-run. Kept by `StateStore.keepChangesForHook` before the files change, read with
/// `pendingHookChanges(of:)` and forgotten with `forgetHookChanges(_:)` once a hook has had them.
public struct HookBacklog: Sendable, Equatable {
    /// The runs whose paths these are: what `forgetHookChanges` forgets. Why by run: a run that keeps its paths
    /// while a hook is under way (a manual run beside the daemon's hook) keeps them for its own hook.
    public var runs: [Int64]
    /// Each changed path once, in the order the runs changed them.
    public var paths: [RelativePath]

    /// The paths `runs` kept, each once.
    public init(runs: [Int64], paths: [RelativePath]) {
        self.runs = runs
        self.paths = paths
    }
}
