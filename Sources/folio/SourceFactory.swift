import Dispatch
import FolioCore
import FolioHTTP
import FolioSFTP

/// Builds the `Source` for a target from its `source` text. The only place that knows every transport.
enum SourceFactory {
    /// Builds the target's source off the cooperative pool: making one reads key, password and CA files.
    static func make(for target: TargetConfig) async throws -> any Source {
        try await Blocking.run { try build(target) }
    }

    private static func build(_ target: TargetConfig) throws -> any Source {
        let location: SourceLocation
        do {
            location = try SourceLocation(parsing: target.source)
        } catch {
            throw SourceError(.protocolViolation, error.message)
        }
        switch location.kind {
        case .local(let path):
            // Checked when the configuration was read too (exit 2); again here for a symlink made since (the daemon).
            if let overlap = target.sourceOverlapOnDisk() { throw SourceError(.localIO, overlap) }
            return LocalSource(rootPath: path, symlinks: target.symlinks)
        case .sftp:
            return try SFTPSource(location: location, settings: target.sourceSettings, timeout: target.timeout,
                                  transfers: target.mostDownloadWorkers)
        case .http:
            return try HTTPSource(location: location, settings: target.sourceSettings, timeout: target.timeout, transfers: target.mostDownloadWorkers)
        }
    }

    /// Starts loading the C libraries the targets' sources need on a background thread: libcurl brings 32
    /// shared libraries (6-7 ms to load here) and libssh2 about 2 ms. Why: loaded on first use, they delayed the
    /// run; loaded now, they overlap opening the state database. Why one after the other: Debian's libcurl
    /// initialises libssh2 too, and `libssh2_init` is not thread-safe. A library that fails to load still says
    /// so, in the same words, when the run first uses it. The group ends when loading does.
    static func preloadLibraries(for targets: [TargetConfig]) -> DispatchGroup {
        var http = false
        var sftp = false
        for target in targets {
            switch (try? SourceLocation(parsing: target.source))?.kind {
            case .http?: http = true
            case .sftp?: sftp = true
            default: break
            }
        }
        let loading = DispatchGroup()
        if http || sftp {
            DispatchQueue.global().async(group: loading) { [http, sftp] in
                if sftp { SFTPSource.loadLibrary() }
                if http { HTTPSource.loadLibrary() }
            }
        }
        return loading
    }
}
