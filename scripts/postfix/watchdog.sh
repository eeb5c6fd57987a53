#!/bin/sh
# Guards one private Postfix instance of the test harness (test/helpers/postfix.ts).
#   watchdog.sh <config_directory> <instance_directory>
# The harness starts this before Postfix, detached, with its stdin a pipe from the test process, and never writes to
# it. The pipe reaches end-of-file when the harness closes it (stop()) or when the test process ends in any way (a
# crash, SIGKILL from jest, Ctrl-C): either way the instance is stopped and its directory removed, so no master is
# ever left running and holding a port. A master outlives the process that started it (it daemonises), hence a
# separate process rather than an exit handler, which SIGKILL would skip.

config_dir=$1
instance_dir=$2
postfix=${POSTFIX:-/usr/sbin/postfix}

cleanup() {
  trap '' TERM INT HUP
  pid=
  [ -f "$instance_dir/queue/pid/master.pid" ] && pid=$(sed -n '1s/[^0-9]//gp' "$instance_dir/queue/pid/master.pid")
  if [ -f "$config_dir/main.cf" ]; then
    # Graceful: the master signals its children and exits; postfix stop waits up to 5 s, then kills the group.
    "$postfix" -c "$config_dir" stop >/dev/null 2>&1
  fi
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -9 -"$pid" 2>/dev/null || kill -9 "$pid" 2>/dev/null
  fi
  rm -rf "$instance_dir"
  exit 0
}

# Ctrl-C in a terminal goes to the test's process group, not ours (we are detached); a TERM sent to us directly
# cleans up at once, which is why cat runs in the background (a trap waits for a foreground command to end). A
# background command of a non-interactive shell gets /dev/null as its stdin, applied before its own redirections
# (so `<&0` would read /dev/null too): the pipe is handed over on descriptor 3.
trap '' INT HUP
exec 3<&0
cat <&3 >/dev/null &
exec 3<&-
reader=$!
trap 'kill "$reader" 2>/dev/null; cleanup' TERM
wait "$reader"
cleanup
