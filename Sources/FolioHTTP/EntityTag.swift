/// An HTTP entity tag (RFC 9110 §8.8.3) as Folio keeps it: the opaque tag in quotes, without the weak mark.
///
/// Why without `W/`: Apache marks a file's tag weak while the file is less than a second old and strong after,
/// with the same opaque tag; kept as sent, the version copied looked changed at the next run and was fetched
/// again. Comparing opaque tags is the weak comparison RFC 9110 gives for "has it changed". Why quoted:
/// wsgidav writes its WebDAV `getetag` bare and its `ETag` header quoted, one tag either way.
enum EntityTag {
    /// The tag of a header or property value, or nil for an empty one.
    static func normalized(_ raw: String?) -> String? {
        guard var tag = raw.map(MultistatusParser.trimmingXMLSpace), !tag.isEmpty else { return nil }
        if tag.hasPrefix("W/") { tag.removeFirst(2) }
        if tag.count >= 2, tag.hasPrefix("\""), tag.hasSuffix("\"") { return tag }
        return tag.isEmpty ? nil : "\"" + tag + "\""
    }
}
