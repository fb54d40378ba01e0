import Foundation

/// The politeness of one source's host, shared by every listing worker and download connection.
///
/// It caps the requests in flight (the per-host `connections` setting: at most `limit` of the workers' kept-alive
/// connections talk at once, each carrying one request, or `streamsPerConnection` once the host has answered over
/// HTTP/2), spaces requests to `requests-per-second`, and holds every request while the server asked for a pause
/// (`Retry-After` on 429/503, an exhausted `X-RateLimit-Remaining`).
final class HostGate: @unchecked Sendable {
    // Why @unchecked: every stored var is read and written only while `condition` is locked.
    private let condition = NSCondition()
    private var inFlight = 0
    private var pausedUntil = Date.distantPast
    private var nextSlot = Date.distantPast
    /// Told of a pause long enough to look like a hang (see `pause`).
    private var announce: (@Sendable (String) -> Void)?
    /// The shortest pause that is announced: shorter ones pass as a slow server.
    static let noticeablePause: TimeInterval = 5
    /// Whether the host answered over HTTP/2, whose connections carry several requests at once (streams).
    private var multiplexes = false
    /// The most connections talking at once: the most requests in flight, until the host multiplexes.
    let limit: Int
    /// How many requests each of the `limit` connections carries at once over HTTP/2. Why 4: servers allow
    /// 100-128 streams a connection (nginx, Apache, browsers use as many), so this stays polite; and at 20 ms of
    /// latency each stream added takes a batch of small files further.
    static let streamsPerConnection = 4
    private let spacing: TimeInterval?

    init(limit: Int, requestsPerSecond: Double?) {
        self.limit = max(1, limit)
        spacing = requestsPerSecond.flatMap { $0 > 0 ? 1 / $0 : nil }
    }

    /// Blocks the calling (non-cooperative) thread until a request may go; returns false when `cancelled`.
    func enter(cancelled: () -> Bool) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while true {
            if cancelled() { return false }
            let now = Date()
            if admit(at: now) { return true }
            let ready = max(pausedUntil, nextSlot)
            // Wake at the end of the pause, on a `leave`, and at least every half second to notice cancellation.
            let wake = inFlight < requestLimit ? min(ready, now + 0.5) : now + 0.5
            _ = condition.wait(until: wake)  // false on timeout; the loop re-checks either way
        }
    }

    /// Takes a request slot only if one is free now: for a batch's extra parallel requests, which must not
    /// wait (and so never hold up another worker's first request).
    func tryEnter() -> Bool {
        condition.lock()
        defer { condition.unlock() }
        return admit(at: Date())
    }

    /// Notes that the host answered over HTTP/2: from now on each connection may carry `streamsPerConnection`
    /// requests.
    func noteMultiplexing() {
        condition.lock()
        multiplexes = true
        condition.signal()
        condition.unlock()
    }

    /// Whether the host has answered over HTTP/2 (see `noteMultiplexing`).
    var isMultiplexing: Bool {
        condition.lock()
        defer { condition.unlock() }
        return multiplexes
    }

    /// The most requests in flight at once now. Called with `condition` locked.
    private var requestLimit: Int { multiplexes ? limit * Self.streamsPerConnection : limit }

    /// Takes a slot if the cap, the pause and the spacing allow one at `now`. Called with `condition` locked.
    private func admit(at now: Date) -> Bool {
        guard inFlight < requestLimit, max(pausedUntil, nextSlot) <= now else { return false }
        inFlight += 1
        if let spacing { nextSlot = max(now, nextSlot) + spacing }
        return true
    }

    func leave() {
        condition.lock()
        inFlight -= 1
        condition.signal()
        condition.unlock()
    }

    /// Where a noticeable pause is announced, from now on.
    func announcePauses(to handler: @escaping @Sendable (String) -> Void) {
        condition.lock()
        announce = handler
        condition.unlock()
    }

    /// Holds every request to this host until `date` (never shortens an existing pause). A pause of
    /// `noticeablePause` or more past the one already held is announced with `why` (who asked, for how long):
    /// the workers that meet the same refusal extend the pause by little, so one refusal is one line.
    func pause(until date: Date, why: @autoclosure () -> String) {
        condition.lock()
        let lengthens = date.timeIntervalSince(max(pausedUntil, Date())) >= Self.noticeablePause
        pausedUntil = max(pausedUntil, date)
        let announce = lengthens ? self.announce : nil
        condition.unlock()
        // Why outside the lock: the handler prints, and must not hold up the workers waiting on the gate.
        announce?(why())
    }
}
