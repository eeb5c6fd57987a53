#!/usr/bin/env bash
# Installs Debian's postfix package for the real-MTA test tier (test/helpers/postfix.ts), once per machine.
#
# The tests never use the system instance: each one runs a private instance from a temporary config directory. So
# the package is installed with "No configuration" (no /etc/postfix/main.cf, nothing listening on port 25) and with
# service starts refused while dpkg runs, so installing it never leaves a system postfix running or fighting a test
# instance (or anything else on the machine) for ports.
#
# Idempotent: when postfix is already installed it exits at once. Safe to run concurrently (jest workers, several
# test files): installs are serialised with a lock, and a second caller finds the package installed.
#
# Exit codes: 0 installed (now or before); 1 could not install (the reason on stderr).
set -euo pipefail

installed() {
  [ -x /usr/sbin/postfix ] && [ -x /usr/sbin/postconf ] &&
    [ "$(dpkg-query -W -f='${Status}' postfix 2>/dev/null || true)" = "install ok installed" ]
}

if installed; then exit 0; fi

if [ "$(id -u)" != 0 ]; then
  # CI runners that are not root usually have password-less sudo; anything else needs a human.
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then exec sudo -n "$0" "$@"; fi
  echo "postfix is not installed and installing it needs root (or password-less sudo): apt-get install postfix" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "postfix is not installed and this is not a Debian-like system (no apt-get); install Postfix 3.4+ by hand" >&2
  exit 1
fi

exec 9>"${TMPDIR:-/tmp}/mailwright-postfix-install.lock"
flock -w 600 9 || { echo "timed out waiting for another postfix install" >&2; exit 1; }
if installed; then exit 0; fi # another caller installed it while we waited

export DEBIAN_FRONTEND=noninteractive
# "No configuration" makes the package install no main.cf, so the system instance cannot start even at boot.
debconf-set-selections <<'SEL'
postfix postfix/main_mailer_type select No configuration
postfix postfix/mailname string localhost
SEL

# Refuse service starts (exit 101 is "action forbidden" for invoke-rc.d) unless a policy is already in place, and
# remove ours afterwards whatever happens.
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\n# temporary, from mailwright scripts/postfix/install.sh\nexit 101\n' >"$policy"
  chmod 755 "$policy"
  trap 'rm -f "$policy"' EXIT
fi

# Only an update when the package lists lack postfix (a fresh image often ships without lists): an update costs
# seconds to minutes, and the lists of a configured machine are usually good enough.
if ! apt-cache show postfix >/dev/null 2>&1; then
  apt-get update -qq
fi

apt_install() {
  # --no-remove: postfix conflicts with other MTAs (exim4, sendmail, ...); replacing the machine's MTA is not a
  # test's decision, so apt aborts instead. The lock timeout waits for another apt run rather than failing.
  apt-get install -y -qq --no-install-recommends --no-remove \
    -o DPkg::Lock::Timeout=300 -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
    postfix
}
if ! apt_install; then
  # Stale lists (a mirror that has moved on: 404 on the .deb) are fixed by an update; anything else fails again.
  apt-get update -qq
  apt_install
fi

# Belt and braces: whatever started during the install (a policy that allowed it, systemd), stop the system
# instance so that it holds no ports. Its config directory has no main.cf, so normally nothing is running.
if [ -f /etc/postfix/main.cf ] && /usr/sbin/postfix status >/dev/null 2>&1; then
  /usr/sbin/postfix stop || true
fi
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
  systemctl disable --now postfix.service >/dev/null 2>&1 || true
fi

installed
