#!/usr/bin/env bash
# Soak test for `folio daemon`: runs it against a local source that keeps changing, samples its memory (VmRSS),
# then checks that the mirror is exact. Bounded: DURATION seconds (default 3600), then it stops by itself.
#   DURATION=300 scripts/soak-daemon.sh
# Settings: DURATION, SAMPLE (seconds between RSS samples, 30), FILES (source files, 2000), FOLIO_BIN.
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${DURATION:-3600}
sample=${SAMPLE:-30}
files=${FILES:-2000}
bin=${FOLIO_BIN:-$PWD/.build/debug/folio}
[[ -x $bin ]] || swift build --product folio

work=$(mktemp -d /tmp/folio-soak.XXXXXX)
daemon=
cleanup() {
  if [[ -n $daemon ]] && kill -0 "$daemon" 2>/dev/null; then kill -TERM "$daemon"; wait "$daemon" || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/src" "$work/state"
for ((i = 0; i < files; i++)); do
  mkdir -p "$work/src/d$((i % 50))"
  head -c $((RANDOM % 8192)) /dev/urandom >"$work/src/d$((i % 50))/f$i"
done
cat >"$work/folio.toml" <<TOML
log-level = "info"
[[target]]
name = "soak"
source = "$work/src"
destination = "$work/dst"
mode = "automatic"
interval = "2s"
TOML

FOLIO_STATE_DIR="$work/state" "$bin" daemon --config "$work/folio.toml" 2>"$work/daemon.log" &
daemon=$!
echo "soak: daemon pid $daemon, $files files, ${duration}s, RSS every ${sample}s"
rss() { awk '/^VmRSS/ {print $2}' "/proc/$daemon/status"; }
# Sample from the end of the first run on: start-up is not what a soak measures.
for ((wait = 0; wait < 600; wait++)); do
  grep -q '(trigger: automatic)$' "$work/daemon.log" && break
  sleep 0.5
done
start=$SECONDS
next_sample=0
samples=()
while ((SECONDS - start < duration)); do
  kill -0 "$daemon" 2>/dev/null || { echo "soak: the daemon died; its log:" >&2; tail -20 "$work/daemon.log" >&2; exit 1; }
  # Change the source a little: rewrite, add and remove a few files.
  for _ in 1 2 3; do
    n=$((RANDOM % files))
    head -c $((RANDOM % 8192)) /dev/urandom >"$work/src/d$((n % 50))/f$n"
  done
  n=$((RANDOM % files))
  if [[ -e $work/src/d$((n % 50))/f$n ]]; then rm "$work/src/d$((n % 50))/f$n"; else echo new >"$work/src/d$((n % 50))/f$n"; fi
  if ((SECONDS - start >= next_sample)); then
    kb=$(rss)
    samples+=("$kb")
    echo "soak: t=$((SECONDS - start))s rss=${kb}KiB runs=$(grep -c '(trigger: automatic)$' "$work/daemon.log")"
    next_sample=$((next_sample + sample))
  fi
  sleep 1
done

# Let the last changes land, then the mirror must be exact.
sleep 6
kill -TERM "$daemon"
status=0
wait "$daemon" || status=$?
daemon=
if ((status != 0)); then echo "soak: the daemon exited $status after SIGTERM" >&2; exit 1; fi
if ! diff -r --exclude=.folio "$work/src" "$work/dst" >/dev/null; then
  echo "soak: the mirror differs from the source" >&2
  diff -r --exclude=.folio "$work/src" "$work/dst" | head >&2
  exit 1
fi
printf 'soak: RSS samples (KiB): %s\n' "${samples[*]}"
echo "soak: first ${samples[0]} KiB, last ${samples[-1]} KiB; mirror exact; errors in log: $(grep -c -E ' (error|critical):' "$work/daemon.log" || true)"
