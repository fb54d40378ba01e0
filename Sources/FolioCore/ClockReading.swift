import Foundation
import Glibc

/// One reading of the two clocks a trash folder's age is told by: the wall clock, and the time since boot.
///
/// Why both: a machine without a battery-backed clock (a Raspberry Pi, a kiosk kept in a cupboard) starts with its
/// wall clock behind, at the last shutdown or at 1970, until NTP sets it. A trash folder made in those minutes
/// looks old by however far behind the clock was, and by the wall clock alone the next run would purge it. The
/// time since boot is never set by anyone, so within one boot it tells the folder's true age; across a reboot
/// nothing does, and a folder first seen after one counts as made then (`seen(at:)`).
struct ClockReading: Equatable, Sendable {
    /// Seconds since 1970, by the wall clock.
    var wall: Int64
    /// Seconds since this boot (`CLOCK_BOOTTIME`, which keeps counting through suspend).
    var sinceBoot: Int64
    /// This boot's identity (`/proc/sys/kernel/random/boot_id`); empty where it cannot be read, and then no
    /// reading is taken for the same boot as another.
    var boot: String
    /// Whether `wall` was set by a later boot's first sight of the reading (`seen(at:)`), and so stands as it is
    /// in any boot after.
    var carried = false

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

    /// This reading as the reading `now` sees it; its `wall` is when the stamped thing was made.
    /// - In the same boot: the later of this reading's wall time and `now`'s wall time less the time since boot
    ///   that has passed since. A wall clock set forward since (NTP) moves the made time up to the truth; one set
    ///   back never makes a thing older than it was stamped.
    /// - In a later boot, the first time: made now, as nothing tells how long ago it was if the wall clock was
    ///   wrong then (a kiosk that ran once with its clock behind, then was switched off). Kept `trash-days` from
    ///   then: longer than asked at worst, never shorter. Carried from then on.
    /// - In a later boot, once carried: as it is.
    func seen(at now: ClockReading) -> ClockReading {
        if !boot.isEmpty, boot == now.boot, now.sinceBoot >= sinceBoot {
            var seen = self
            seen.wall = max(wall, now.wall - (now.sinceBoot - sinceBoot))
            return seen
        }
        guard !carried else { return self }
        var seen = now
        seen.carried = true
        return seen
    }

    /// The reading as a line of text: `boot sinceBoot wall`, then ` carried` when it is.
    var text: String { "\(boot.isEmpty ? "-" : boot) \(sinceBoot) \(wall)\(carried ? " carried" : "")\n" }

    /// Reads `text`'s line back; nil for anything else.
    init?(text: String) {
        let fields = text.trimmingCharacters(in: .newlines).split(separator: " ")
        guard fields.count == 3 || (fields.count == 4 && fields[3] == "carried"),
              let sinceBoot = Int64(fields[1]), let wall = Int64(fields[2]) else { return nil }
        self.init(wall: wall, sinceBoot: sinceBoot, boot: fields[0] == "-" ? "" : String(fields[0]), carried: fields.count == 4)
    }

    init(wall: Int64, sinceBoot: Int64, boot: String, carried: Bool = false) {
        self.wall = wall
        self.sinceBoot = sinceBoot
        self.boot = boot
        self.carried = carried
    }
}
