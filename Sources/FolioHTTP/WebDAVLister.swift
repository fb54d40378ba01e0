import FolioCore
import Foundation
import Synchronization

/// Lists a WebDAV tree with PROPFIND, asking only for the four properties Folio uses.
///
/// It first tries one `Depth: infinity` request at the root (one round trip for the whole tree), with the root's
/// `Depth: 1` request alongside (`RootDepthOne`); servers that refuse infinity (403, as nginx and Apache do by
/// default) are walked with `Depth: 1` per folder from there, many in flight.
/// A server known to refuse infinity (`infinityRefused`, from the last runs' `HTTPListingMemo`) is walked with
/// `Depth: 1` from the start, and the folders it had then are listed ahead (`known`, see `ListingWalk`).
/// When the server's kind is not known yet, that first request is also the probe for WebDAV (see `probing`).
/// Every href must name the folder itself or one child of it (or, for infinity, a path below the root);
/// anything else makes the folder's listing a protocol error, never a path.
struct WebDAVLister: Sendable {
    let client: HTTPClient
    let exclude: ExcludeFilter
    /// Whether the server is not yet known to speak WebDAV (`webdav = "auto"`, first snapshot): the root's
    /// PROPFIND is then the probe, and an answer that is not WebDAV's throws `NotWebDAV` instead of failing.
    var probing = false
    /// Whether the last run found that the server refuses `Depth: infinity`: the root is then asked with
    /// `Depth: 1` only.
    var infinityRefused = false
    /// Folders the last run had, listed ahead when the walk is `Depth: 1` from the start.
    var known: [RelativePath] = []

    /// The server answered the root's PROPFIND as a plain web server would (404, 405, 501, a page): list its
    /// index pages instead.
    struct NotWebDAV: Error {}

    /// Responses are bounded: a folder of 100,000 entries is about 40 MiB of multistatus.
    static let depthOneLimit = 64 << 20
    static let infinityLimit = 512 << 20

    private static let query = Array("""
        <?xml version="1.0" encoding="utf-8"?>
        <D:propfind xmlns:D="DAV:"><D:prop><D:resourcetype/><D:getcontentlength/><D:getlastmodified/><D:getetag/></D:prop></D:propfind>
        """.utf8)

    /// Whether the server refused `Depth: infinity` in this listing, set by the root's worker.
    private final class InfinityAnswer: Sendable {
        /// Why a Mutex: set on the root's worker thread, read once the walk is over.
        let value: Mutex<Bool>

        init(refused: Bool) { value = Mutex(refused) }
    }

    /// What a listing found: the tree, and whether the server refused `Depth: infinity` (asked, or known).
    struct Listing {
        var builder: SnapshotBuilder
        var infinityRefused: Bool
    }

    /// Lists the whole tree.
    func snapshot(workers: ListingWalk.Workers) async throws -> Listing {
        let rootDepthOne = RootDepthOne()
        let refused = InfinityAnswer(refused: infinityRefused)
        // Why only a walk that is `Depth: 1` from the start lists ahead: an infinity answer would make every
        // folder listed ahead a wasted request.
        let builder = try await ListingWalk.run(workers: workers, root: .folder(.root), known: infinityRefused ? known : [],
                                                 handles: client.idleHandles) { job, easy, walk, paths in
            switch job {
            case .folder(let folder): try list(folder, easy: easy, walk: walk, paths: &paths, rootDepthOne: rootDepthOne, refused: refused)
            case .rootDepthOne: rootDepthOne.runIfWaiting { try propfind(.root, depth: "1", easy: easy, walk: walk) ?? [] }
            case .head: return
            }
        }
        return Listing(builder: builder, infinityRefused: refused.value.withLock { $0 })
    }

    private func list(_ folder: RelativePath, easy: CurlEasy, walk: ListingWalk.Scope, paths: inout PathArena,
                      rootDepthOne: RootDepthOne, refused: InfinityAnswer) throws {
        let responses: [MultistatusParser.Response]
        if folder.isRoot, infinityRefused {
            responses = try propfind(.root, depth: "1", easy: easy, walk: walk) ?? []
        } else if folder.isRoot {
            walk.push(.rootDepthOne)
            if let all = try propfind(.root, depth: "infinity", easy: easy, walk: walk) {
                rootDepthOne.drop()
                let folders = try take(all, in: .root, infinite: true, walk: walk, paths: &paths)
                // A server that quietly answers infinity with depth 1 would hide the tree's deeper levels: when
                // nothing deeper than the root's children came back, list those subfolders one by one.
                if !folders.isEmpty, !folders.contains(where: { $0.depth > 1 }), !responsesGoDeeper(all) {
                    folders.forEach { walk.push(.folder($0)) }
                }
                return
            }
            refused.value.withLock { $0 = true }
            responses = try rootDepthOne.result { try propfind(.root, depth: "1", easy: easy, walk: walk) ?? [] }
        } else {
            responses = try propfind(folder, depth: "1", easy: easy, walk: walk) ?? []
        }
        for subfolder in try take(responses, in: folder, infinite: false, walk: walk, paths: &paths) { walk.push(.folder(subfolder)) }
    }

    private func responsesGoDeeper(_ responses: [MultistatusParser.Response]) -> Bool {
        responses.contains { ((try? client.urls.names(ofHref: $0.href))?.count ?? 0) > 1 }
    }

    /// The responses of one PROPFIND, or nil when the server refuses `Depth: infinity` (403 and the like).
    private func propfind(_ folder: RelativePath, depth: String, easy: CurlEasy, walk: ListingWalk.Scope) throws -> [MultistatusParser.Response]? {
        let url = client.urls.url(for: folder, folder: true)
        let limit = depth == "1" ? Self.depthOneLimit : Self.infinityLimit
        let response = try client.send(with: easy, cancelled: { walk.isStopped }, makeRequest: {
            CurlEasy.Request(method: "PROPFIND", url: url,
                             headers: ["Depth: \(depth)", "Content-Type: application/xml; charset=utf-8", "Expect:"],
                             body: Self.query, bodyLimit: limit)
        })
        switch response.status {
        case 207:
            do {
                return try MultistatusParser.parse(response.body)
            } catch {
                throw SourceError(.protocolViolation, "PROPFIND \(url): \(error)", path: folder)
            }
        case 404 where folder.isRoot, 410 where folder.isRoot:
            // Why not "does not exist" while probing: plain servers answer a method they do not know with 404 as
            // well, and would list fine with GET, whose own 404 then reports a folder that is really missing.
            if probing { throw NotWebDAV() }
            throw SourceError(.notFound, "source folder \(url) does not exist (HTTP \(response.status)); check the URL", underlying: "HTTP \(response.status)")
        case 400 where depth == "infinity", 403 where depth == "infinity", 501 where depth == "infinity":
            return nil
        case 401:
            throw client.error(status: response.status, url: url, path: folder)
        case 405 where folder.isRoot && !probing, 501 where folder.isRoot && !probing:
            throw SourceError(.protocolViolation, "\(url) does not speak WebDAV (PROPFIND answered HTTP \(response.status)); set webdav = \"auto\" (folio mirror: --webdav auto) to read its index pages instead",
                              underlying: "HTTP \(response.status)")
        default:
            // While probing, any other answer at the root means a plain web server (which the index listing then
            // asks with GET, and whose own errors it reports).
            if probing && folder.isRoot { throw NotWebDAV() }
            throw client.error(status: response.status, url: url, path: folder)
        }
    }

    /// Why an entry the server's listing refused (`refusal`, a status line) is unreadable.
    private static func refused(_ refusal: String) -> String {
        "the server's listing answers \(refusal) for it; check its permissions on the server"
    }

    /// Turns responses into entries (added to `walk`) and returns the subfolders found.
    private func take(_ responses: [MultistatusParser.Response], in folder: RelativePath, infinite: Bool, walk: ListingWalk.Scope,
                      paths: inout PathArena) throws -> [RelativePath] {
        let url = client.urls.url(for: folder, folder: true)
        let folderNames = folder.components.map(Array.init)
        var entries: [Entry] = []
        var issues: [ListingIssue] = []
        var subfolders: [RelativePath] = []
        var seen = Set<RelativePath>()
        for response in responses {
            let names: [[UInt8]]
            do {
                names = try client.urls.names(ofHref: response.href)
            } catch {
                throw SourceError(.protocolViolation, "PROPFIND \(url) listed href \"\(RelativePath.display(response.href.utf8))\", which \(error); refused this folder's listing", path: folder)
            }
            if names == folderNames {
                if folder.isRoot, response.hasProperties, !response.isCollection {
                    throw SourceError(.notFound, "source \(url) is a file, not a folder; give a folder's URL", path: folder)
                }
                if !response.hasProperties, let refusal = response.refusal {
                    // lighttpd answers PROPFIND on a folder it may not read with 207 and the folder's own 403,
                    // listing no children: that is not an empty folder, whose files would then be removed.
                    if folder.isRoot {
                        throw SourceError(.permission, "source folder \(url) cannot be read: the server's listing answers \(refusal) for it; check the server's permissions for this user", path: folder, underlying: refusal)
                    }
                    walk.add([], issues: [ListingIssue(path: folder.description, kind: .unreadable(Self.refused(refusal)))])
                    return []
                }
                continue
            }
            guard names.count > folderNames.count, names[..<folderNames.count].elementsEqual(folderNames),
                  infinite || names.count == folderNames.count + 1 else {
                throw SourceError(.protocolViolation, "PROPFIND \(url) listed href \"\(RelativePath.display(response.href.utf8))\", which is not inside the folder; refused this folder's listing", path: folder)
            }
            var path = folder
            var excluded = false
            var invalid = false
            for (index, name) in names[folderNames.count...].enumerated() {
                let isLast = folderNames.count + index == names.count - 1
                do {
                    // The entry's own path in the arena; a folder above it (named by a `Depth: infinity` answer)
                    // is made only to be checked, and its own response gives it a path of its own.
                    path = isLast ? try path.appending(name: name, in: &paths) : try path.appending(name: name)
                } catch {
                    issues.append(ListingIssue(path: RelativePath.display(Array(names.joined(separator: [UInt8(ascii: "/")]))), kind: .skipped("\(error)")))
                    invalid = true
                    break
                }
                if !exclude.isEmpty, exclude.excludes(path, isFolder: !isLast || response.isCollection) {
                    excluded = true
                    break
                }
            }
            if invalid || excluded { continue }
            guard seen.insert(path).inserted else {
                issues.append(ListingIssue(path: path.description, kind: .skipped("listed twice by the server; kept the first")))
                continue
            }
            guard response.hasProperties else {
                issues.append(ListingIssue(path: path.description, kind: .unreadable(response.refusal.map(Self.refused) ?? "the server gave no properties for it")))
                continue
            }
            let mtime = response.lastModified.flatMap(HTTPDate.parse).map { FileTime(seconds: $0) } ?? .unknown
            if response.isCollection {
                entries.append(Entry(path: path, kind: .folder, mtime: mtime, precision: .second))
                subfolders.append(path)
            } else if let size = response.contentLength, size >= 0 {
                entries.append(Entry(path: path, kind: .file, size: size, mtime: mtime, precision: .second, validator: EntityTag.normalized(response.etag)))
            } else {
                issues.append(ListingIssue(path: path.description, kind: .unreadableFile("the server gave no size (getcontentlength) for it")))
            }
        }
        if folder.isRoot, responses.isEmpty {
            throw SourceError(.protocolViolation, "PROPFIND \(url) answered an empty multistatus; refused", path: folder)
        }
        walk.add(entries, issues: issues)
        return subfolders
    }
}
