#!/usr/bin/env bash
# Installs what building, testing and the demo need on Debian 12 (run as root). Safe to run again.
set -euo pipefail
packages=(
  pkg-config libssh2-1-dev libcurl4-openssl-dev libsqlite3-dev libsystemd-dev  # build
  openssh-server openssh-client nginx libnginx-mod-http-dav-ext apache2 python3 util-linux  # test servers
  proftpd-core proftpd-mod-crypto  # an SFTP server that is not OpenSSH (mod_sftp; SFTPEndToEndTests)
  exfatprogs exfat-fuse  # a destination that ignores case (CaseInsensitiveDestinationTests)
  faketime  # a wall clock behind the time since boot (MirrorEndToEndTests: trash made before NTP set the clock)
  gdb  # scripts/run-tests.sh: the stacks of a test that hangs
  systemd strace  # scripts/verify-systemd.sh: systemd-analyze verify, and the daemon's system calls vs its filter
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "folio: these Debian packages are missing: ${missing[*]}; run this script as root" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# The packages enable services we do not want running; tests start their own on 127.0.0.1 high ports.
for service in nginx apache2 ssh proftpd; do
  systemctl disable --now "$service" >/dev/null 2>&1 || true
done
# An unprivileged account for the SFTP tests' unreadable-folder case (root reads everything). '*' rather than
# useradd's locked '!': sshd without PAM refuses locked accounts even for key log-ins.
if [[ $(id -u) -eq 0 ]] && ! id -u folio-test >/dev/null 2>&1; then
  useradd --system --no-create-home --shell /bin/sh --password '*' folio-test
fi
