#!/usr/bin/env bash
# Installs Debian's dovecot-imapd for the bounce mailbox test (test/helpers/dovecot.ts), once per machine.
#
# The tests never use the system service: each runs a private dovecot from a temporary config directory on a loopback
# port. So service starts are refused while dpkg runs, and whatever the package started is stopped and disabled
# afterwards, so the system instance never holds port 143/993.
#
# Idempotent (exits at once when installed) and safe to run concurrently (installs are serialised with a lock).
# Exit codes: 0 installed (now or before); 1 could not install (the reason on stderr).
set -euo pipefail

installed() {
  [ -x /usr/sbin/dovecot ] && [ "$(dpkg-query -W -f='${Status}' dovecot-imapd 2>/dev/null || true)" = "install ok installed" ]
}

if installed; then exit 0; fi

if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then exec sudo -n "$0" "$@"; fi
  echo "dovecot-imapd is not installed and installing it needs root (or password-less sudo): apt-get install dovecot-imapd" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "dovecot-imapd is not installed and this is not a Debian-like system (no apt-get); install Dovecot 2.3 by hand" >&2
  exit 1
fi

exec 9>"${TMPDIR:-/tmp}/mailwright-dovecot-install.lock"
flock -w 600 9 || { echo "timed out waiting for another dovecot install" >&2; exit 1; }
if installed; then exit 0; fi

export DEBIAN_FRONTEND=noninteractive
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\n# temporary, from mailwright scripts/dovecot/install.sh\nexit 101\n' >"$policy"
  chmod 755 "$policy"
  trap 'rm -f "$policy"' EXIT
fi

if ! apt-cache show dovecot-imapd >/dev/null 2>&1; then
  apt-get update -qq
fi

apt_install() {
  apt-get install -y -qq --no-install-recommends --no-remove \
    -o DPkg::Lock::Timeout=300 -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
    dovecot-core dovecot-imapd
}
if ! apt_install; then
  apt-get update -qq
  apt_install
fi

# Whatever started during the install: the system service must not hold ports.
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
  systemctl disable --now dovecot.service dovecot.socket >/dev/null 2>&1 || true
fi
if [ -f /run/dovecot/master.pid ] && kill -0 "$(cat /run/dovecot/master.pid)" 2>/dev/null; then
  /usr/sbin/dovecot stop >/dev/null 2>&1 || true
fi

installed
