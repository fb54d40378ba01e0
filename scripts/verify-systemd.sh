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
