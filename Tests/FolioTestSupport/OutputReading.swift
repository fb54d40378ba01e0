import Foundation

extension FileHandle {
    /// Reads from this pipe into `seen` until `seen` holds `text`, or until the writer closes its end; returns
    /// whether it holds `text`. For a test that acts once a running folio has said something (a stage, a line).
    @discardableResult
    public func read(into seen: inout Data, until text: String) -> Bool {
        while !String(decoding: seen, as: UTF8.self).contains(text) {
            let chunk = availableData
            if chunk.isEmpty { return false }
            seen.append(chunk)
        }
        return true
    }
}
