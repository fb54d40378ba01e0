import Synchronization

/// The quickest request-and-answer turn a source has seen on its link: what the engine reads to tell a near
/// server (a LAN, loopback) from a far one when it chooses how many downloads to run at once.
public final class RoundTripGauge: Sendable {
    // Why a Mutex: every listing and download thread of a source records its turns here.
    private let quickest = Mutex<Duration?>(nil)

    /// A gauge with no turn recorded yet.
    public init() {}

    /// Notes one turn: a request sent and its answer back (the server's own work included).
    public func record(_ turn: Duration) {
        quickest.withLock { value in value = min(value ?? turn, turn) }
    }

    /// The quickest turn so far, or nil before the first.
    public var fastest: Duration? { quickest.withLock { $0 } }
}
