import Dispatch
import FolioCore
import FolioHTTP
import FolioSFTP

/// Builds the `Source` for a target from its `source` text. The only place that knows every transport.
enum SourceFactory {
    static func make(for target: TargetConfig) throws -> any Source {
        let location: SourceLocation
        do {
            location = try SourceLocation(parsing: target.source)
        } catch {
            throw SourceError(.protocolViolation, error.message)
        }
        switch location.kind {
        case .local(let path):
            return LocalSource(rootPath: path, symlinks: target.symlinks)
        case .sftp:
            return try SFTPSource(location: location, settings: target.sourceSettings, timeout: target.timeout,
                                  transfers: target.transfers, symlinks: target.symlinks)
        case .http:
            return try HTTPSource(location: location, settings: target.sourceSettings, timeout: target.timeout, transfers: target.transfers)
        }
    }

    /// Starts loading the C libraries the targets' sources need, each on a background thread: libcurl brings 32
    /// shared libraries (6-7 ms to load here) and libssh2 about 2 ms. Why: loaded on first use, they delayed the
    /// first request; loaded now, they overlap opening the state database and taking the target's lock. A
    /// library that fails to load says so when the source is made, as before.
    static func preloadLibraries(for targets: [TargetConfig]) {
        var http = false
        var sftp = false
        for target in targets {
            switch (try? SourceLocation(parsing: target.source))?.kind {
            case .http?: http = true
            case .sftp?: sftp = true
            default: break
            }
        }
        if http { DispatchQueue.global().async { HTTPSource.loadLibrary() } }
        if sftp { DispatchQueue.global().async { SFTPSource.loadLibrary() } }
    }
}
