@testable import FolioCore
import Foundation
import Glibc
import XCTest

/// Fetches files through a source connection's batch path (`SourceConnection.download(batch:)`), as the
/// download stage does, into a scratch folder: what the SFTP and HTTP batch tests share.
public enum BatchFetch {
    /// Fetches `entries` in one batch on `connection` (blocking: call it off the cooperative pool); returns each
    /// file's bytes by path, or nil for a file the batch did not complete. Asserts that every partial file was
    /// closed by the batch's end and that each completed file has its listed size.
    public static func fetch(_ entries: [Entry], with connection: any SourceConnection, into scratch: TemporaryDirectory) throws -> [String: [UInt8]?] {
        let batch = DownloadBatch(
            entries: entries, progress: TransferProgress(),
            openPartial: { index in open(scratch.path("\(index)"), O_RDWR | O_CREAT | O_TRUNC, 0o644) },
            seal: { index, sink in
                close(sink.fileDescriptor)
                return .success(Installer.Sealed(download: SyncPlan.Download(entry: entries[index], replacing: nil, hasLocalChanges: false),
                                                 partialName: "\(index)", inode: 0, mtime: entries[index].mtime, bytes: sink.bytesTransferred))
            },
            discard: { index in unlink(scratch.path("\(index)")) })
        try connection.download(batch: batch)
        // Each file's partial is sealed and closed as its last byte arrives (or as it fails), so a batch of a
        // thousand files never holds a thousand descriptors. (Counted in the scratch folder: an HTTP batch's new
        // connections stay open for the next batch.)
        XCTAssertEqual(openDescriptors(under: scratch.path), 0, "every partial file is closed once its bytes are in")
        var result: [String: [UInt8]?] = [:]
        for (index, entry) in entries.enumerated() {
            if case .success(let sealed)? = batch.takeComplete(index) {
                XCTAssertEqual(sealed.bytes, entry.size, entry.path.description)
                result[entry.path.description] = FixtureTree.read(scratch.path("\(index)"))
            } else {
                result[entry.path.description] = .some(nil)
            }
        }
        batch.discardRest()
        return result
    }

    /// How many descriptors this process has open on files under `folder`.
    static func openDescriptors(under folder: String) -> Int {
        let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return descriptors.filter { descriptor in
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + descriptor))?.hasPrefix(folder + "/") ?? false
        }.count
    }
}
