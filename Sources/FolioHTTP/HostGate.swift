import Foundation

/// The politeness of one source's host, shared by every listing worker and download connection.
///
/// It caps the requests in flight (the per-host `connections` setting: at most `limit` of the workers' kept-alive
/// connections talk at once), spaces requests to `requests-per-second`, and holds every request
/// while the server asked for a pause (`Retry-After` on 429/503, an exhausted `X-RateLimit-Remaining`).
final class HostGate: @unchecked Sendable {
    // Why @unchecked: every stored var is read and written only while `condition` is locked.
    private let condition = NSCondition()
    private var inFlight = 0
    private var pausedUntil = Date.distantPast
    private var nextSlot = Date.distantPast
    /// The most requests in flight at once.
    let limit: Int
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
            let wake = inFlight < limit ? min(ready, now + 0.5) : now + 0.5
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

    /// Takes a slot if the cap, the pause and the spacing allow one at `now`. Called with `condition` locked.
    private func admit(at now: Date) -> Bool {
        guard inFlight < limit, max(pausedUntil, nextSlot) <= now else { return false }
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

    /// Holds every request to this host until `date` (never shortens an existing pause).
    func pause(until date: Date) {
        condition.lock()
        pausedUntil = max(pausedUntil, date)
        condition.unlock()
    }
}
