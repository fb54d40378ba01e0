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
}
