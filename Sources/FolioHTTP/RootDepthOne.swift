import Foundation

/// The root's `Depth: 1` PROPFIND, sent alongside the `Depth: infinity` one, so that a server refusing infinity
/// (nginx, and Apache by default) costs no round trip more than one allowing it.
///
/// Whichever listing worker gets to it first runs it: a spare worker that picked up the job, or the root's own
/// worker when none was free (one thread, or `connections = 1`) and it needs the answer. The root's worker takes
/// the result only when infinity is refused, and drops the request when infinity answered.
final class RootDepthOne: @unchecked Sendable {
    // Why @unchecked: `state` is read and written only while `condition` is locked.
    private enum State {
        case waiting
        case running
        case done(Result<[MultistatusParser.Response], any Error>)
        case dropped
    }

    private let condition = NSCondition()
    private var state = State.waiting

    /// Runs `fetch` and keeps its outcome, unless another worker has already taken the request (or dropped it).
    func runIfWaiting(_ fetch: () throws -> [MultistatusParser.Response]) {
        guard claim(.running) else { return }
        let outcome = Result { try fetch() }
        condition.lock()
        state = .done(outcome)
        condition.broadcast()
        condition.unlock()
    }

    /// The root's children: fetched here when no worker has started the request, else its outcome once it is in.
    func result(_ fetch: () throws -> [MultistatusParser.Response]) throws -> [MultistatusParser.Response] {
        if claim(.running) { return try fetch() }
        condition.lock()
        defer { condition.unlock() }
        while true {
            if case .done(let outcome) = state { return try outcome.get() }
            condition.wait()
        }
    }

    /// Infinity answered: the request is not sent if no worker started it yet.
    func drop() { _ = claim(.dropped) }

    /// Moves a waiting request to `next`; false when a worker already has it.
    private func claim(_ next: State) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        guard case .waiting = state else { return false }
        state = next
        return true
    }
}
