#!/usr/bin/env bash
# Checks systemd/folio.service with `systemd-analyze verify` (what CI can do without booting systemd).
# verify insists that ExecStart's program exists, so it checks a copy whose ExecStart points at the built binary
# (FOLIO_BIN, default .build/debug/folio, built if missing). Any message from verify fails the check.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${FOLIO_BIN:-$PWD/.build/debug/folio}
if [[ ! -x $bin ]]; then
  swift build --product folio
fi
command -v systemd-analyze >/dev/null || { echo "verify-systemd: systemd-analyze is missing (Debian package systemd)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sed "s#^ExecStart=/usr/local/bin/folio #ExecStart=$bin #" systemd/folio.service >"$work/folio.service"
grep -q "^ExecStart=$bin daemon" "$work/folio.service" || { echo "verify-systemd: ExecStart is not /usr/local/bin/folio daemon …" >&2; exit 1; }
"$bin" daemon --help >/dev/null
out=$(systemd-analyze verify "$work/folio.service" 2>&1) || { echo "$out" >&2; exit 1; }
if [[ -n $out ]]; then
  echo "$out" >&2
  echo "verify-systemd: systemd-analyze verify printed the messages above" >&2
  exit 1
fi
echo "verify-systemd: systemd/folio.service passes systemd-analyze verify"

# The sandbox must fit the program: run the daemon under strace through a sync, a hook, a reload and a stop, and
# check every system call it made is in SystemCallFilter=@system-service and nothing maps memory writable and
# executable (MemoryDenyWriteExecute=yes).
if ! command -v strace >/dev/null; then
  echo "verify-systemd: strace is missing (Debian package strace); system call check skipped"
  exit 0
fi
grep -q '^SystemCallFilter=@system-service$' systemd/folio.service || { echo "verify-systemd: SystemCallFilter changed; update this check" >&2; exit 1; }
mkdir -p "$work/src/sub" "$work/state"
echo one >"$work/src/a.txt"
echo two >"$work/src/sub/b.txt"
cat >"$work/folio.toml" <<TOML
[[target]]
name = "check"
source = "$work/src"
destination = "$work/dst"
mode = "automatic"
interval = "1s"
on-change = ["/bin/true", "{target}"]
TOML
FOLIO_STATE_DIR="$work/state" NOTIFY_SOCKET="$work/notify.sock" WATCHDOG_USEC=500000 \
  strace -f -qq -o "$work/trace" "$bin" daemon --config "$work/folio.toml" 2>"$work/daemon.log" &
tracer=$!
for _ in $(seq 100); do [[ -f $work/dst/a.txt ]] && break; sleep 0.1; done
echo three >"$work/src/c.txt"
sleep 2
pid=$(pgrep -P "$tracer" -x folio || true)
[[ -n $pid ]] || { echo "verify-systemd: the traced daemon is not running; its log:" >&2; cat "$work/daemon.log" >&2; exit 1; }
kill -HUP "$pid"
sleep 1
kill -TERM "$pid"
wait "$tracer" || { echo "verify-systemd: the traced daemon did not exit 0; its log:" >&2; cat "$work/daemon.log" >&2; exit 1; }
[[ -f $work/dst/c.txt ]] || { echo "verify-systemd: the traced daemon did not sync; its log:" >&2; cat "$work/daemon.log" >&2; exit 1; }
# Only the daemon's own calls: the hook is another program, which the filter covers too but is not ours to check.
sed -E 's/^[0-9]+ +//; s/^<\.\.\. ([a-z0-9_]+) resumed>.*/\1/; s/\(.*//' "$work/trace" | grep -E '^[a-z0-9_]+$' | sort -u >"$work/used"
systemd-analyze syscall-filter 2>/dev/null | awk '
  /^@/ { group = $1; next }
  /^ +[@a-z0-9_-]+$/ && group != "" { gsub(/ /, ""); members[group] = members[group] " " $0 }
  END {
    todo["@system-service"] = 1
    while (length(todo) > 0) {
      for (g in todo) { delete todo[g]; if (g in seen) continue; seen[g] = 1
        n = split(members[g], list, " ")
        for (i = 1; i <= n; i++) { if (list[i] ~ /^@/) todo[list[i]] = 1; else print list[i] } }
    }
  }' | sort -u >"$work/allowed"
outside=$(comm -23 "$work/used" "$work/allowed")
if [[ -n $outside ]]; then
  echo "verify-systemd: the daemon made system calls outside SystemCallFilter=@system-service: $outside" >&2
  exit 1
fi
if grep -E 'PROT_WRITE\|PROT_EXEC|PROT_EXEC\|PROT_WRITE|mprotect\(.*PROT_EXEC' "$work/trace" | grep -v execve >/dev/null; then
  echo "verify-systemd: the daemon maps writable executable memory, which MemoryDenyWriteExecute=yes forbids" >&2
  exit 1
fi
echo "verify-systemd: the daemon's $(wc -l <"$work/used") system calls are all in @system-service; no writable executable memory"
