import Foundation
import Glibc
import XCTest

/// A small filesystem made in an image file and mounted for one test, for the destinations /tmp's own filesystem
/// cannot play (coarse times, a case-ignoring name lookup). Needs root; where mounting is not allowed, the test
/// is skipped with the reason.
public final class MountedImage {
    /// How the image is mounted: by the kernel through a loop device, or by a FUSE helper that wants a block
    /// device (exfat-fuse), given the loop device the image is attached to.
    public enum Mounting {
        case loop
        case fuse(helper: String)
    }

    public let mountPoint: String
    private let image: String
    private let mounting: Mounting
    private var loopDevice: String?
    private var mounted = false

    /// Makes an image of `megabytes` in `scratch`, runs `mkfs` on it (the image's path appended; a missing tool
    /// fails the test, as `scripts/install-deps.sh` installs it) and mounts it at `scratch/mnt`.
    public init(in scratch: TemporaryDirectory, megabytes: Int, mkfs: [String], mounting: Mounting) throws {
        guard getuid() == 0 else { throw XCTSkip("mounting a filesystem image needs root") }
        let image = scratch.path("fs.img")
        self.image = image
        self.mounting = mounting
        mountPoint = scratch.path("mnt")
        try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: true)
        guard FileManager.default.createFile(atPath: image, contents: nil), truncate(image, off_t(megabytes) << 20) == 0 else {
            throw LoopbackServer.Failure("cannot make the image \(image)")
        }
        try LoopbackServer.run(mkfs[0], Array(mkfs.dropFirst()) + [image])
        do {
            switch mounting {
            case .loop:
                try LoopbackServer.run("mount", ["-o", "loop", image, mountPoint])
            case .fuse(let helper):
                let device = try LoopbackServer.run("losetup", ["--find", "--show", image]).trimmingCharacters(in: .whitespacesAndNewlines)
                loopDevice = device
                try LoopbackServer.run(helper, [device, mountPoint])
            }
            mounted = true
        } catch {
            detach()
            throw XCTSkip("cannot mount a filesystem image here: \(error)")
        }
    }

    /// Unmounts and mounts the image again, as a drive unplugged and plugged back in: what a filesystem keeps
    /// in memory only (exfat-fuse's times as set) is gone.
    public func remount() throws {
        // A worker thread of the last run may still be letting go of its descriptors: "target is busy" for a moment.
        for attempt in 1... {
            do {
                try LoopbackServer.run("umount", [mountPoint])
                break
            } catch where attempt < 50 {
                usleep(100_000)
            }
        }
        switch mounting {
        case .loop: try LoopbackServer.run("mount", ["-o", "loop", image, mountPoint])
        case .fuse(let helper): try LoopbackServer.run(helper, [loopDevice ?? image, mountPoint])
        }
    }

    /// Unmounts (lazily: a worker thread of the last run may still be letting go of its descriptors) and lets the
    /// loop device go.
    public func unmount() throws {
        if mounted { try LoopbackServer.run("umount", ["--lazy", mountPoint]) }
        mounted = false
        detach()
    }

    private func detach() {
        if let loopDevice { _ = try? LoopbackServer.run("losetup", ["--detach", loopDevice]) }
        loopDevice = nil
    }
}
