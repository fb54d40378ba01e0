import Synchronization

/// Live counters of one target's run, shared by the download workers (writers) and the progress display (reader).
///
/// Why atomics and a mutex: workers on their own threads update these for every chunk, and the display samples
/// them on a timer; neither may wait on the other for long.
public final class TransferProgress: Sendable {
    private let bytes = Atomic<Int64>(0)
    private let files = Atomic<Int>(0)
    private let cancelled = Atomic<Bool>(false)
    private let active = Mutex<[RelativePath]>([])
    private let pacer = Mutex<BandwidthPacer?>(nil)
    /// Whether `pacer` is set. Why apart: every chunk of every download asks, and without a limit (nearly every
    /// run) the answer must not cost the workers a shared lock.
    private let limited = Atomic<Bool>(false)

    /// Counters at zero, nothing in flight, not cancelled.
    public init() {}

    /// Bytes written by downloads so far this run (a batch abandoned midway takes its bytes back).
    public var bytesDone: Int64 { bytes.load(ordering: .relaxed) }
    /// Files installed under their final names so far this run.
    public var filesDone: Int { files.load(ordering: .relaxed) }
    /// Whether `cancel()` was called; workers check it between chunks.
    public var isCancelled: Bool { cancelled.load(ordering: .relaxed) }
    /// The files being copied right now.
    public var inFlight: [RelativePath] { active.withLock { $0 } }

    /// Counts `count` more bytes written (negative to take back a discarded batch's).
    public func add(bytes count: Int64) { bytes.add(count, ordering: .relaxed) }
    /// Counts one more file installed.
    public func fileFinished() { files.add(1, ordering: .relaxed) }
    /// Stops the workers between chunks; partial files stay for the next run to resume.
    public func cancel() { cancelled.store(true, ordering: .relaxed) }

    /// Holds this run's downloads, all together, within `limit` from now on (nil: no limit).
    public func limitBandwidth(_ limit: BandwidthLimit?) {
        pacer.withLock { $0 = limit.map { BandwidthPacer($0, now: .now) } }
        limited.store(limit != nil, ordering: .relaxed)
    }

    /// Under a bandwidth limit, the most a source should read at once (a tenth of a second of the limit, at least
    /// 16 KiB), so that the run's traffic stays smooth rather than bursts of a whole read-ahead at full speed; nil
    /// without a limit.
    public var largestPacedRead: Int? {
        guard limited.load(ordering: .relaxed) else { return nil }
        return pacer.withLock { pacer in pacer.map { max(16 << 10, Int($0.bytesPerSecond / 10)) } }
    }

    /// Charges `count` bytes just received to the run's bandwidth limit: how long their worker waits before it
    /// reads on (zero without a limit).
    func pace(_ count: Int) -> Duration {
        guard limited.load(ordering: .relaxed) else { return .zero }
        return pacer.withLock { pacer in pacer == nil ? .zero : pacer!.charge(count, at: .now) }
    }

    func started(_ path: RelativePath) { active.withLock { $0.append(path) } }
    func ended(_ path: RelativePath) {
        active.withLock { list in
            if let index = list.firstIndex(of: path) { list.remove(at: index) }
        }
    }
}
