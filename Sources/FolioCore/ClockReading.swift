import Foundation
import Glibc

/// One reading of the two clocks a trash folder's age is told by: the wall clock, and the time since boot.
///
/// Why both: a machine without a battery-backed clock (a Raspberry Pi, a kiosk kept in a cupboard) starts with its
/// wall clock behind, at the last shutdown or at 1970, until NTP sets it. A trash folder made in those minutes
/// looks old by however far behind the clock was, and by the wall clock alone the next run would purge it. The
/// time since boot is never set by anyone, so within one boot it tells the folder's true age.
struct ClockReading: Equatable, Sendable {
    /// Seconds since 1970, by the wall clock.
    var wall: Int64
    /// Seconds since this boot (`CLOCK_BOOTTIME`, which keeps counting through suspend).
    var sinceBoot: Int64
    /// This boot's identity (`/proc/sys/kernel/random/boot_id`); empty where it cannot be read, and then no
    /// reading is taken for the same boot as another.
    var boot: String

    /// The clocks now.
    static func now() -> ClockReading {
        var uptime = timespec()
        clock_gettime(CLOCK_BOOTTIME, &uptime)
        return ClockReading(wall: Int64(Date().timeIntervalSince1970), sinceBoot: Int64(uptime.tv_sec), boot: thisBoot)
    }

    /// Read once: it cannot change while this process runs.
    private static let thisBoot: String = {
        guard let text = try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8) else { return "" }
        return text.trimmingCharacters(in: .whitespacesAndNewlines)
    }()

    /// When something stamped with this reading was made, as the reading `now` sees it: the later of this
    /// reading's wall time and, in the same boot, `now`'s wall time less the time since boot that has passed
    /// since. Why the later: a wall clock set forward since (NTP) moves the made time up to the truth; a wall
    /// clock set back since, or a reading from another boot, never makes a thing older than it was stamped.
    func made(seenAt now: ClockReading) -> Int64 {
        guard !boot.isEmpty, boot == now.boot, now.sinceBoot >= sinceBoot else { return wall }
        return max(wall, now.wall - (now.sinceBoot - sinceBoot))
    }

    /// The reading as a line of text: `boot sinceBoot wall`.
    var text: String { "\(boot.isEmpty ? "-" : boot) \(sinceBoot) \(wall)\n" }

    /// Reads `text`'s line back; nil for anything else.
    init?(text: String) {
        let fields = text.split(separator: " ")
        guard fields.count == 3, let sinceBoot = Int64(fields[1]),
              let wall = Int64(fields[2].trimmingCharacters(in: .newlines)) else { return nil }
        self.init(wall: wall, sinceBoot: sinceBoot, boot: fields[0] == "-" ? "" : String(fields[0]))
    }

    init(wall: Int64, sinceBoot: Int64, boot: String) {
        self.wall = wall
        self.sinceBoot = sinceBoot
        self.boot = boot
    }
}
