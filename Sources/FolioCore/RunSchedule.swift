import Foundation

/// When the daemon runs each automatic target, as pure arithmetic the scheduler and its tests share.
///
/// A target runs `interval` after the end of its last run, plus a small random jitter so that many targets (or
/// many machines started together) do not hit one server at the same moment. A failed run is retried sooner,
/// with exponential backoff (and a tenth of each wait as jitter) that never waits longer than `interval`.
/// Targets on the same host run one at a time, so together they never open more connections to it than one
/// target's download workers.
public enum RunSchedule {
    /// The first retry after a failure waits this long; each further failure doubles it (up to `interval`).
    public static let firstRetrySeconds = 10.0

    /// The most jitter added to a delay: a tenth of the interval, never more than five minutes.
    public static func jitterLimit(interval: Int) -> Double {
        min(Double(interval) / 10, 300)
    }

    /// Seconds to wait after a run ended. `consecutiveFailures` counts the failed runs in a row (0 after a good
    /// run); `random` is a number in 0..<1 that picks the jitter.
    public static func delay(interval: Int, consecutiveFailures: Int, random: Double) -> Double {
        let share = min(max(random, 0), 1)
        guard consecutiveFailures > 0 else { return Double(interval) + jitterLimit(interval: interval) * share }
        // Why clamp the exponent: 2^n overflows to infinity long before a year of failures, and min() would
        // still give `interval`, but a bounded exponent keeps the arithmetic obviously finite.
        let doubled = firstRetrySeconds * pow(2, Double(min(consecutiveFailures - 1, 30)))
        // Why a retry's jitter is a tenth of its own wait, not of the interval: the first retry of an hourly
        // target would otherwise wait anywhere from 10 s to 5 min 10 s.
        let jitter = min(jitterLimit(interval: interval), doubled / 10) * share
        // A retry never waits longer than `interval`, jitter included.
        return min(doubled + jitter, Double(interval))
    }

    /// `due` held at one interval from `now` when it is further off than any delay this schedule sets: only a
    /// clock set back since (NTP correcting a kiosk's clock, a hand) puts it there, and the target would
    /// otherwise wait out the whole step back.
    public static func clamped(_ due: Date, now: Date, interval: Int) -> Date {
        due.timeIntervalSince(now) > Double(interval) + jitterLimit(interval: interval) ? now.addingTimeInterval(Double(interval)) : due
    }

    /// A target the scheduler could start.
    public struct Candidate: Sendable, Equatable {
        /// The target's name.
        public var name: String
        /// The source's host, or nil for a local source (which shares no connection cap).
        public var host: String?
        /// When the target is due to run.
        public var due: Date

        /// A candidate from its name, host and due time.
        public init(name: String, host: String?, due: Date) {
            self.name = name
            self.host = host
            self.due = due
        }
    }

    /// The targets to start now: due ones, earliest first, at most `slots` of them, skipping a target whose
    /// host already has a run (in `busyHosts` or picked before it in this call).
    public static func startable(_ candidates: [Candidate], now: Date, busyHosts: Set<String>, slots: Int) -> [String] {
        var busy = busyHosts
        var picked: [String] = []
        for candidate in candidates.sorted(by: { ($0.due, $0.name) < ($1.due, $1.name) }) where candidate.due <= now {
            guard picked.count < slots else { break }
            if let host = candidate.host {
                guard !busy.contains(host) else { continue }
                busy.insert(host)
            }
            picked.append(candidate.name)
        }
        return picked
    }

    /// The host whose connection cap a source shares: `host:port` of an SFTP or HTTP source, nil for a local one.
    public static func host(of source: String) -> String? {
        guard let location = try? SourceLocation(parsing: source) else { return nil }
        switch location.kind {
        case .local: return nil
        case .sftp(_, let host, let port, _): return "\(host.lowercased()):\(port)"
        case .http(_, let host, let port, _, _): return "\(host.lowercased()):\(port)"
        }
    }
}
