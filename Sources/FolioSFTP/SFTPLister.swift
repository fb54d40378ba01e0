import FolioCore

/// Lists a source tree: one `find` over exec when the server allows it, else SFTP readdir with many folders in
/// flight on one session's pipe (`SFTPFolderWalk`), or, when the pipe cannot be used, across a few sessions of
/// libssh2's SFTP. Every path classifies entries with the same code, so they list the same tree.
struct SFTPLister: Sendable {
    /// Which listing path to use; `automatic` is the product's, the others let tests pin one path:
    /// `readdirOnly` skips exec, `sessionReaddirOnly` also skips the pipe.
    enum Method: Sendable { case automatic, execOnly, readdirOnly, sessionReaddirOnly }

    let endpoint: SFTPEndpoint
    let options: ListingOptions
    let method: Method
    /// Where the listing sessions go once the listing succeeded, for the first download workers.
    let idle: IdleSessions
    /// How downloads fetch small files: with tar where it runs (the exec listing then leaves one waiting, and
    /// marks it missing on a server that runs no commands).
    let tarBatch: TarBatch
    /// The first session, when one started logging in ahead of the listing (`SFTPSource.prepare`).
    let loggingIn: SessionWorker?

    /// The most bytes an exec listing may produce (about five million entries) before Folio gives up on it.
    static let execOutputLimit = 512 << 20

    func snapshot() async throws -> Snapshot {
        var workers = [loggingIn ?? SessionWorker(endpoint: endpoint, label: "list0")]
        do {
            let snapshot = try await list(with: &workers)
            for worker in workers { await worker.park(in: idle) }
            return snapshot
        } catch {
            for worker in workers { await worker.close() }
            throw error
        }
    }

    /// Lists the tree, adding sessions to `workers` as the readdir levels widen.
    private func list(with workers: inout [SessionWorker]) async throws -> Snapshot {
        // The listing's parallelism (4, or `transfers` if more) while the link is near; over a far one, where each
        // folder costs its round trips, as many sessions as may log in at once (a no-change run of 20,000 files in
        // 400 folders from an SFTP-only account over 20 ms: 7.6 s with 4 sessions, 4.5 with 8). The first
        // session's log-in and the root's listing time the link before a level adds any.
        let near = max(1, min(options.parallelism, HandshakeGate.limit))
        let far = max(near, HandshakeGate.limit)
        let endpoint = self.endpoint
        let options = self.options
        let tarBatch = self.tarBatch
        let today = ListingHints.today()
        let last = SFTPListingMemo(options.hints.memo)
        var memo = SFTPListingMemo()
        // A server known to run no commands has no tar for the downloads either.
        if last.refusesCommands(today: today) { tarBatch.markMissing() }
        let triesExec = method == .execOnly || (method == .automatic && !last.skipsExec(today: today))
        if method == .automatic && !triesExec {
            (memo.commandsRefusedOn, memo.findUnusableOn) = (last.commandsRefusedOn, last.findUnusableOn)
        }
        let realRoot: [UInt8]
        var pipeFailed = false
        var listing = FolderListing()
        var pending: [FolderJob]
        let attempt: ExecAttempt = triesExec ? try await workers[0].run({ session in try Self.execListing(session, endpoint, options, tarBatch: tarBatch) }) : .notListed
        switch attempt {
        case .listed(let root, let found):
            (realRoot, listing) = (root, found)
            pending = found.folders
        case .noCommands, .notListed:
            if triesExec {
                if case .noCommands = attempt { memo.commandsRefusedOn = today } else { memo.findUnusableOn = today }
            }
            // Over the pipe the listing then uses, where it may: the root costs one round trip instead of five. A
            // pipe that failed here is not tried again for the listing.
            let triesPipe = method != .sessionReaddirOnly
            (realRoot, pipeFailed) = try await workers[0].run { session in
                if triesPipe, let root = try Self.resolveRootOverPipe(session, endpoint) { return (root, false) }
                return (try Self.resolveRoot(session, endpoint), triesPipe)
            }
            if method == .execOnly {
                throw SourceError(.protocolViolation, "\(endpoint.url()): the server does not allow listing with exec and GNU find")
            }
            pending = [FolderJob(path: .root, remote: realRoot, chain: [])]
        }
        let classifier = EntryClassifier(realRoot: realRoot, options: options)
        if method != .sessionReaddirOnly, !pipeFailed, !pending.isEmpty,
           let walked = try await workers[0].run({ [pending] session in try Self.pipeListing(pending, session, classifier) }) {
            listing.found.merge(walked.found)
            pending = []
        }
        // Readdir over libssh2's SFTP, breadth first, where the pipe could not be used: each level's folders are
        // shared among the sessions through one counter.
        var mostSessions = far
        while !pending.isEmpty {
            let sessions = min(mostSessions, TargetConfig.isFar(roundTrip: endpoint.roundTrips.fastest) ? far : near)
            while workers.count < min(sessions, pending.count) {
                workers.append(SessionWorker(endpoint: endpoint, label: "list\(workers.count)"))
            }
            let queue = FolderQueue(pending)
            let (level, refused) = try await withThrowingTaskGroup(of: (index: Int, found: FolderListing?).self) { group in
                for (index, worker) in workers.prefix(pending.count).enumerated() {
                    group.addTask {
                        // An added session that cannot log in (a server that caps each user's connections) leaves its
                        // share to the others, as an extra download worker does. The first session listed the root,
                        // so every level has one; a session that fails once it listed fails the listing.
                        if index > 0 {
                            do { try await worker.run { _ in () } } catch { return (index, nil) }
                        }
                        return (index, try await worker.run { session in
                            var found = FolderListing()
                            var paths = PathArena()
                            // Why a job ahead: its folder's open rides with this one's readdir (see `listFolder`).
                            var job = queue.next()
                            while let current = job {
                                job = queue.next()
                                found.merge(try classifier.list(current, next: job, session, paths: &paths))
                            }
                            return found
                        })
                    }
                }
                var merged = FolderListing()
                var refused: [Int] = []
                for try await result in group {
                    if let found = result.found { merged.merge(found) } else { refused.append(result.index) }
                }
                return (merged, refused)
            }
            if !refused.isEmpty {
                // Not asked again: the cap holds for the rest of the listing.
                for index in refused.sorted(by: >) { workers.remove(at: index) }
                mostSessions = workers.count
            }
            listing.found.merge(level.found)
            pending = level.folders
        }
        var snapshot = listing.found.finish()
        snapshot.memo = memo.text
        return snapshot
    }

    /// The root's real path; a missing root, one the server may not reach or one that is not a folder is an error,
    /// never an empty tree.
    static func resolveRoot(_ session: SSHSession, _ endpoint: SFTPEndpoint) throws(SourceError) -> [UInt8] {
        let root = endpoint.remotePath(.root)
        let real: [UInt8]
        do {
            real = try session.realpath(root)
        } catch {
            // Without a reason from the stat, the realpath's status (misread) must not pick the message either.
            let why = session.whyRealpathFailed(root, error) ?? LibSSH2Error(code: error.code, message: error.message)
            throw session.sourceError(why, doing: "opening", remote: root)
        }
        let attributes: RemoteAttributes
        do {
            attributes = try session.stat(real, followLinks: true)
        } catch {
            throw session.sourceError(error, doing: "opening", remote: root)
        }
        try requireFolder(attributes, endpoint)
        return real
    }

    /// The root's real path as `resolveRoot` finds it, over the session's pipe: its realpath and its stat (which
    /// follows links) ride together, one round trip, timed. Nil when the pipe cannot be used (refused, or an
    /// answer not understood), for the caller to ask through libssh2's SFTP instead.
    ///
    /// Why: libssh2's way costs five round trips (its SFTP channel's three, the realpath, the stat), and on an
    /// SFTP-only account, where the listing then goes over the pipe anyway, nothing else needs that channel.
    static func resolveRootOverPipe(_ session: SSHSession, _ endpoint: SFTPEndpoint) throws(SourceError) -> [UInt8]? {
        let root = endpoint.remotePath(.root)
        let answers = try overPipe(session, doing: "opening", remote: root) { pipe in
            var real: Result<[UInt8], LibSSH2Error>?
            var attributes: Result<RemoteAttributes, LibSSH2Error>?
            let realpathID = pipe.makeID(), statID = pipe.makeID()
            var requests = SFTPPipe.Request()
            requests.realpath(id: realpathID, path: root)
            requests.stat(id: statID, path: root)
            let asking = ContinuousClock.now
            try pipe.send(requests)
            var awaited = [realpathID: SFTPPipe.Message.realpath, statID: .stat]
            while !awaited.isEmpty {
                let (asked, answer) = try pipe.receive(from: &awaited)
                var fields = FieldReader(answer.body)
                let error = answer.type == SFTPPipe.Message.status.rawValue ? try fields.statusError() : nil
                if asked == .realpath, answer.type == SFTPPipe.Message.name.rawValue, let name = try fields.names().first?.name {
                    real = .success(name)
                } else if asked == .stat, answer.type == SFTPPipe.Message.attributes.rawValue {
                    attributes = .success(try fields.attributes())
                } else if let error {
                    if asked == .realpath { real = .failure(error) } else { attributes = .failure(error) }
                } else {
                    throw SFTPPipe.Malformed()
                }
            }
            endpoint.roundTrips.record(ContinuousClock.now - asking)
            return (real, attributes)
        }
        guard let (real, attributes) = answers else { return nil }
        // Where both failed, the stat's error is the one reported, as on libssh2's path (`whyRealpathFailed`).
        switch (real, attributes) {
        case (.success(let real)?, .success(let attributes)?):
            try requireFolder(attributes, endpoint)
            return real
        case (_, .failure(let error)?), (.failure(let error)?, _):
            throw session.sourceError(error, doing: "opening", remote: root)
        default:
            return nil
        }
    }

    /// A root that is not a folder is an error, never an empty tree.
    private static func requireFolder(_ attributes: RemoteAttributes, _ endpoint: SFTPEndpoint) throws(SourceError) {
        guard attributes.kind == .folder else {
            throw SourceError(.notFound, "\(endpoint.url()) is not a folder on the server; give the folder to mirror")
        }
    }

    /// Lists `jobs` and everything below them over the session's pipe (`SFTPFolderWalk`); nil when the pipe cannot
    /// be used (refused, or an answer not understood), for the caller to list over libssh2's SFTP instead.
    static func pipeListing(_ jobs: [FolderJob], _ session: SSHSession, _ classifier: EntryClassifier) throws(SourceError) -> FolderListing? {
        try overPipe(session, doing: "listing", remote: jobs[0].remote) { pipe in
            var listing = FolderListing()
            var paths = PathArena()
            try SFTPFolderWalk.walk(jobs, over: pipe) { job, listed in
                let found = try classifier.classify(job, listed, session, paths: &paths)
                listing.found.merge(found.found)
                return found.folders
            }
            return listing
        }
    }

    /// Runs `body` with the session's pipe. Nil when the pipe cannot be used (refused, or an answer not
    /// understood): the pipe is then dropped, for the caller to go through libssh2's SFTP instead. A lost
    /// connection is the error of `action` on `remote`; a `SourceError` from `body` is rethrown as it is.
    private static func overPipe<T>(_ session: SSHSession, doing action: String, remote: [UInt8], _ body: (SFTPPipe) throws -> T) throws(SourceError) -> T? {
        do {
            return try body(try session.pipe())
        } catch let error as SourceError {
            throw error
        } catch let error as LibSSH2Error {
            session.dropPipe()
            if error.isConnectionLoss { throw session.sourceError(error, doing: action, remote: remote) }
            return nil
        } catch {
            session.dropPipe()
            return nil
        }
    }

    /// What trying the exec listing came to.
    enum ExecAttempt: Sendable {
        /// The tree, with the root's real path.
        case listed(realRoot: [UInt8], listing: FolderListing)
        /// The server runs no commands (an SFTP-only account).
        case noCommands
        /// The server runs commands, but find is missing or not GNU, the root cannot be entered, or the output is
        /// incomplete.
        case notListed
    }

    /// The exec fast path.
    ///
    /// Where tar batches work, the listing's command goes on to start `tar`, which waits in the root for the
    /// first batch's names: that batch then costs no channel and no command start (two round trips). A server
    /// that runs no commands has no tar either: it is marked missing now, before the downloads are planned.
    static func execListing(_ session: SSHSession, _ endpoint: SFTPEndpoint, _ options: ListingOptions, tarBatch: TarBatch) throws(SourceError) -> ExecAttempt {
        let root = endpoint.remotePath(.root)
        let outcome: ExecListing.Outcome
        var tree = EntryClassifier.ExecTree(options: options)
        do {
            outcome = try ExecListing.run(on: session, root: root, then: tarBatch.isAvailable ? TarBatch.tarCommand : nil,
                                          limit: execOutputLimit) { tree.take($0) }
        } catch {
            if error.isConnectionLoss { throw session.sourceError(error, doing: "listing", remote: root) }
            return .notListed
        }
        switch outcome {
        case .noCommands:
            tarBatch.markMissing()
            return .noCommands
        case .notListed:
            return .notListed
        case .listed(let realRoot):
            return .listed(realRoot: realRoot, listing: try tree.finish(realRoot: realRoot, session))
        }
    }
}
