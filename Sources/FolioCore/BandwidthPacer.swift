/// Keeps a run's downloads, all together, within a `BandwidthLimit`: each chunk a download receives is charged
/// to one budget, and the worker that received it waits until the budget has caught up with it.
///
/// Why charge after receiving, not before: a source hands over what arrived (a curl write callback, an SFTP read),
/// and the wait before its next read holds its connection back, as the kernel's socket buffer fills and the
/// server's sending stops. Over the run, bytes received stay within the limit, plus `burst`.
struct BandwidthPacer: Sendable {
    let bytesPerSecond: Double
    /// When the budget is spent up to: past it, the downloads may go on at once.
    private var evenAt: ContinuousClock.Instant
    /// The idle time a run may make up for at full speed: a short pause (a file's set-up, a round trip) is not
    /// lost to the rate, but a long one does not buy a burst far over the limit.
    static let burst = Duration.milliseconds(250)

    init(_ limit: BandwidthLimit, now: ContinuousClock.Instant) {
        bytesPerSecond = Double(limit.bytesPerSecond)
        evenAt = now
    }

    /// Charges `count` bytes received at `now`, and returns how long their receiver waits before it reads on.
    mutating func charge(_ count: Int, at now: ContinuousClock.Instant) -> Duration {
        evenAt = max(evenAt, now - Self.burst) + .seconds(Double(count) / bytesPerSecond)
        return evenAt > now ? evenAt - now : .zero
    }
}
