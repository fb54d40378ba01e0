import Dispatch

/// Where blocking work runs: file and SQLite I/O, `fsync`, reading key files, loading C libraries.
public enum Blocking {
    /// Runs `work` on a global dispatch queue and returns its result. Why: the cooperative pool has one thread
    /// per core, so a call that waits for the disk or the network there stalls every task behind it.
    public static func run<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: work()) }
        }
    }

    /// Runs throwing `work` on a global dispatch queue and returns its result or rethrows its error.
    public static func run<T: Sendable, E: Error>(_ work: @escaping @Sendable () throws(E) -> T) async throws(E) -> T {
        try await run { Result(catching: work) }.get()
    }
}
