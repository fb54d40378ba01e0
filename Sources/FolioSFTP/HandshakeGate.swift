import Dispatch
import FolioCore

/// Bounds how many SSH handshakes this process runs at once.
///
/// Why: sshd drops new connections beyond `MaxStartups` (10 by default) that have not finished authenticating;
/// the engine may open `transfers` connections at the same moment, so at most 8 handshakes run at a time.
enum HandshakeGate {
    static let limit = 8
    private static let slots = DispatchSemaphore(value: limit)

    /// Runs `body` (a blocking handshake) once a slot is free. Call from a session's own queue or a worker
    /// thread only, never from the cooperative pool: it may wait.
    static func withSlot<T>(_ body: () throws(SourceError) -> T) throws(SourceError) -> T {
        slots.wait()
        defer { slots.signal() }
        return try body()
    }
}
