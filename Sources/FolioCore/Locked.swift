import Synchronization

/// A value behind a mutex, as a class so escaping closures (dispatch work items) can share it.
public final class Locked<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>

    /// Wraps `value`.
    public init(_ value: Value) { mutex = Mutex(value) }

    /// Runs `body` with the value under the lock and returns what it returns.
    public func withLock<R: Sendable>(_ body: (inout Value) throws -> R) rethrows -> R {
        try mutex.withLock { try body(&$0) }
    }
}
