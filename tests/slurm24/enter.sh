#!/bin/bash
# Run a command inside the Debian 13 root (tests/slurm24/root.sh makes it) in namespaces
# of its own: network (only its own loopback, so its Slurm, MariaDB and greenupd ports
# cannot meet the host's cluster), mount (its own /proc, /run, /tmp, /dev/shm), PID (every
# process it starts ends with it) and IPC. The repository is mounted read-only at
# /greenup and $GC24_BIN (if set) at /greenup-bin. Nothing it starts outlives it, and
# nothing stays mounted on the host. Usage: enter.sh COMMAND [ARG...]  Run as root.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
REPO=$(cd "$HERE/../.." && pwd)
[ -f "$GC24_ROOT/.greenup-root" ] || { echo "enter: no root at $GC24_ROOT: run tests/slurm24/root.sh" >&2; exit 1; }
[ $# -gt 0 ] || { echo "usage: enter.sh COMMAND [ARG...]" >&2; exit 2; }

# Its own host name, which its /etc/hosts resolves (Slurm and munge look themselves up).
grep -qs "[[:space:]]$GC24_HOSTNAME\$" "$GC24_ROOT/etc/hosts" || echo "127.0.1.1	$GC24_HOSTNAME" >> "$GC24_ROOT/etc/hosts"
# The host's /sys is shared, read-only at its top; the cgroup mounts under it stay as the
# host has them. Everything else that holds state is the root's own or a fresh tmpfs.
export GC24_HOSTNAME
# One run in the root at a time (its MariaDB data and Slurm state live in the root).
exec 9>"$GC24_DIR/.lock"
flock 9
# The PID namespace's first process ends everything in the namespace when it dies; a
# signal to this script kills it, so an interrupted run leaves nothing behind.
unshare --net --mount --pid --ipc --uts --fork --kill-child --propagation private \
  bash -c '
  set -e
  R=$1 REPO=$2 BIN=$3; shift 3
  hostname "$GC24_HOSTNAME"
  mount -t proc proc "$R/proc"
  mount --rbind /sys "$R/sys"; mount -o remount,bind,ro "$R/sys"
  mount --rbind /dev "$R/dev"
  mount -t tmpfs -o mode=1777 tmpfs "$R/dev/shm"
  mount -t tmpfs -o mode=0755 tmpfs "$R/run"
  mount -t tmpfs -o mode=1777 tmpfs "$R/tmp"
  mkdir -p "$R/greenup" "$R/greenup-bin"
  mount --bind "$REPO" "$R/greenup"; mount -o remount,bind,ro "$R/greenup"
  [ -z "$BIN" ] || mount --bind "$BIN" "$R/greenup-bin"
  chroot "$R" /usr/sbin/ip link set lo up
  # Slurm 24.11 binds its listening sockets with getaddrinfo(AF_INET, AI_ADDRCONFIG), which
  # finds nothing unless some non-loopback IPv4 address exists: give lo one from TEST-NET-1.
  chroot "$R" /usr/sbin/ip addr add 192.0.2.1/32 dev lo
  set +e
  chroot "$R" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOME=/root LANG=C.UTF-8 TERM="${TERM:-dumb}" GC_REPO=/greenup "$@"
  ' enter24 "$GC24_ROOT" "$REPO" "${GC24_BIN:-}" "$@" 9>&- &
ns=$!
trap 'pkill -KILL -P $ns; wait $ns; exit 130' INT TERM HUP
wait $ns
