/// Where a target's files come from: a local folder, an SFTP server, a web server.
///
/// A source does two things: it lists its tree into a `Snapshot`, and it opens connections that download files
/// (one at a time, or small ones in batches where the source can). The engine never knows which transport is
/// behind it.
public protocol Source: Sendable {
    /// The source for people: its URL without credentials.
    var displayName: String { get }
    var features: SourceFeatures { get }

    /// Lists the whole tree below the source root.
    ///
    /// Throws `SourceError` when the root itself is missing, unreadable or unreachable. A folder below the root
    /// that cannot be read becomes an `.unreadable` issue in the snapshot instead, so the rest is still mirrored.
    /// Blocking work runs off the cooperative thread pool.
    func snapshot(options: ListingOptions) async throws -> Snapshot

    /// A run of this source is about to start: begins, in the background, what its listing must wait for before
    /// it can ask anything (an SSH log-in), so that the wait overlaps the run's own start (opening the state
    /// database, taking the destination's lock, recording the run, making the destination's folders). Returns at
    /// once; a second call before the listing does nothing. Called before the run, possibly before its lock is
    /// taken (a run by hand starts it while the state database opens); `finishRun` cuts and ends what it began if
    /// the listing never used it (the run ended first, or must wait for the lock), and a later `prepare` begins
    /// it again.
    func prepare()

    /// Opens one connection for one download worker. Called on that worker's own thread; the connection is
    /// used there only, so it may block.
    func makeConnection() throws -> any SourceConnection
    /// The run is over: closes what the source kept open for later (SFTP sessions left by the listing for the
    /// download workers), off the cooperative pool. Why the engine calls it before the run returns: what a
    /// source closes on its own, at the last release, could run on any thread, even while the process exits
    /// and its C libraries tear down under it. The source stays usable; a later run opens what it needs.
    func finishRun() async
    /// The run is being stopped (Ctrl-C, SIGTERM): ends at once what would otherwise wait on the server (a
    /// connection being opened, a listing), which then throws `.cancelled`, rather than after the timeout.
    /// Downloads still stop between chunks; one that its server holds up may be cut after a short grace. Called
    /// from any thread; the source is not used for another run after.
    func interrupt()
    /// Where to say, while a run goes on, what the person watching it should know at once (a server that asked
    /// Folio to wait minutes, which would look like a hang): the engine sets it at the start of each run, and
    /// `handler` may be called from any thread.
    func sendNotices(to handler: @escaping @Sendable (String) -> Void)
    /// The quickest request-and-answer turn the source has seen so far, its listing included; nil for a source
    /// without a link (a local folder). With `transfers` unset, a far link gets more download workers; and a
    /// near one spreads parallel batches over every worker (see `SourceFeatures.parallelBatches`).
    var roundTrip: Duration? { get }
}

extension Source {
    /// By default, nothing to start ahead.
    public func prepare() {}
    /// By default, nothing is kept open, so there is nothing to close.
    public func finishRun() async {}
    /// By default, nothing to cut short.
    public func interrupt() {}
    /// By default, nothing to say.
    public func sendNotices(to handler: @escaping @Sendable (String) -> Void) {}
    /// By default nil: no link.
    public var roundTrip: Duration? { nil }
}

/// One transport connection, owned by one download worker and used from its thread only.
///
/// Not `Sendable` on purpose: C handles (a libssh2 session, a curl easy handle) must be used by one thread at a
/// time, and the type system keeps them on the worker that opened them.
public protocol SourceConnection: AnyObject {
    /// Copies `entry`'s content into `sink`, starting at `offset` (the bytes before it are already there).
    ///
    /// Before returning, checks that what was sent is the version that was listed (size, mtime or validator);
    /// a file that changed meanwhile throws `.changed`. Checks `sink` for cancellation between chunks.
    func download(_ entry: Entry, into sink: DownloadSink, from offset: Int64) throws

    /// Fetches many small files in one request, for sources whose `features.batchDownloads` is set. Marks in
    /// `batch` the files that arrived whole and unchanged; the engine fetches the others one by one. Throws
    /// only when the connection itself failed; the default fetches nothing.
    func download(batch: DownloadBatch) throws

    /// Releases the connection; called once, on the worker's thread.
    func close()
}

extension SourceConnection {
    /// By default, fetches nothing: the engine then fetches each file on its own.
    public func download(batch: DownloadBatch) throws {}
}

/// What a source can tell and do.
public struct SourceFeatures: Sendable, Equatable {
    /// How finely the source reports modification times.
    public var mtimePrecision: TimePrecision
    /// Whether entries carry checksums.
    public var checksums: Bool
    /// Whether `download(_:into:from:)` honours a non-zero offset.
    public var resumable: Bool
    /// Whether connections may fetch many small files per request (`download(batch:)`); the engine then
    /// groups small files into batches.
    public var batchDownloads: Bool
    /// Whether opening a connection costs many round trips (an SSH handshake and login): the engine then opens
    /// another one only for work that outlasts it, a large file or a full batch of small ones.
    public var costlyConnections: Bool
    /// Whether one batch fetches its files in parallel, as many at once as the server takes (HTTP GETs on
    /// several connections). Over a far link the engine then gives each worker a large file or a full batch,
    /// as another worker would only split the same requests in flight; over a near one, where each file's own
    /// work takes the time, every worker takes batches with its share of those requests.
    public var parallelBatches: Bool
    /// Whether the listing uses `ListingOptions.hints` (the last run's folders and memo); the engine reads them
    /// from the state database only for such a source.
    public var listsAhead: Bool
    /// Whether the listing uses only `ListingOptions.hints.memo` (what it learned about its server last time);
    /// the engine then reads the memo alone, not the record's folders.
    public var readsMemo: Bool

    /// Features from their values; only `mtimePrecision` is required, and `resumable` is the one flag on by default.
    public init(mtimePrecision: TimePrecision, checksums: Bool = false, resumable: Bool = true, batchDownloads: Bool = false,
                costlyConnections: Bool = false, parallelBatches: Bool = false, listsAhead: Bool = false, readsMemo: Bool = false) {
        self.mtimePrecision = mtimePrecision
        self.checksums = checksums
        self.resumable = resumable
        self.batchDownloads = batchDownloads
        self.costlyConnections = costlyConnections
        self.parallelBatches = parallelBatches
        self.listsAhead = listsAhead
        self.readsMemo = readsMemo
    }
}
