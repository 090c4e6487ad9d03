#!/bin/bash
# Make (or reuse) the Debian 13 root that holds greenup's second test cluster: Debian's
# Slurm 24.11, munge, MariaDB and the tools the cluster tests use, installed with
# debootstrap and apt from the Debian mirror this machine's apt already uses.
# The root is cached under $GC24_DIR (default /var/lib/greenup-test24) and reused
# when its package list is unchanged. Prints the root's path on the last line.
# Run as root on a Debian machine. REBUILD=1 makes it again from scratch.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"

# Everything the cluster harness (tests/cluster), its benchmark (gcc: the empty baseline
# plugin) and the package test run inside the root; libopenmpi-dev: the root's mpicc and
# Open MPI 5's mpi.h, which greenup's MPI runtime is compiled against for this root
# (tests/slurm24/mpicc.sh); gfortran: the runtime's Fortran probe (tests/slurm24/runtime.sh).
PKGS="slurmctld slurmd slurm-client slurm-wlm-basic-plugins slurmdbd libslurm-dev munge libmunge2
mariadb-server mariadb-client lua5.4 liblua5.4-0 jq python3 sqlite3 procps iproute2 psmisc ca-certificates
gcc libc6-dev libopenmpi-dev gfortran"
# Open MPI and the real applications, the same list the host's cluster installs.
. "$HERE/../../scripts/lib.sh"
PKGS="$PKGS ${GREENUP_APP_DEBS[*]}"
want=$(echo "$GC24_SUITE" $PKGS | tr -s ' \n' '  ')

mkdir -p "$GC24_DIR"
# Not while a run is inside the root (tests/slurm24/enter.sh holds the same lock).
exec 9>"$GC24_DIR/.lock"
flock 9
# apt-get install PACKAGES inside root DIR (a testing suite's Release file expires within
# a week, so a mirror that lags behind would refuse it: its date is not checked here, in a
# test root that only ever installs these packages), with its /proc, in a mount namespace of its
# own, so that nothing stays mounted if this script is interrupted. Output to LOG.
root_apt() { # DIR LOG PACKAGES...
  local dir=$1 log=$2; shift 2
  unshare --mount --propagation private bash -c '
    set -e
    mount -t proc proc "$1/proc"
    mount --rbind /dev "$1/dev"
    chroot "$1" /usr/bin/env DEBIAN_FRONTEND=noninteractive bash -c "
      apt-get -o Acquire::Check-Valid-Until=false update -qq && apt-get install -y -qq --no-install-recommends $2 && apt-get clean"
  ' root24 "$dir" "$*" > "$log" 2>&1 9>&- \
    || { tail -n 20 "$log" >&2; echo "root24: apt in the root failed; see $log" >&2; return 1; }
}

if [ "${REBUILD:-0}" != 1 ] && [ -f "$GC24_ROOT/.greenup-root" ]; then
  have=$(cat "$GC24_ROOT/.greenup-root")
  if [ "$have" = "$want" ]; then
    echo "root24: reusing $GC24_ROOT (Slurm $(gc24_slurm_version))"
    echo "$GC24_ROOT"; exit 0
  fi
  # Same suite and only packages added: install those into the cached root instead of
  # making it again (a minute instead of several).
  read -r have_suite have_pkgs <<<"$have"
  added=$(comm -13 <(tr ' ' '\n' <<<"$have_pkgs" | sort -u) <(tr ' ' '\n' <<<"$PKGS" | grep . | sort -u) | tr '\n' ' ')
  dropped=$(comm -23 <(tr ' ' '\n' <<<"$have_pkgs" | grep . | sort -u) <(tr ' ' '\n' <<<"$PKGS" | sort -u))
  if [ "$have_suite" = "$GC24_SUITE" ] && [ -z "$dropped" ] && ! grep -qs " $GC24_ROOT/" /proc/mounts; then
    echo "root24: adding to $GC24_ROOT: $added"
    root_apt "$GC24_ROOT" "$GC24_DIR/apt.log" $added || exit 1
    echo "$want" > "$GC24_ROOT/.greenup-root"
    echo "root24: updated $GC24_ROOT (Slurm $(gc24_slurm_version))"
    echo "$GC24_ROOT"; exit 0
  fi
fi

command -v debootstrap >/dev/null || {
  export DEBIAN_FRONTEND=noninteractive; apt-get update -qq; apt-get install -y -qq --no-install-recommends debootstrap >/dev/null; }

# The mirror apt uses here (deb822 or one-line sources), not the security archive.
mirror=$(grep -hsE '^(URIs:|deb )' /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list \
  | grep -oE 'https?://[^ ]+/debian/?( |$)' | grep -v security | head -n 1 | tr -d ' ' || true)
mirror=${GC24_MIRROR:-${mirror:-http://deb.debian.org/debian}}

new=$GC24_DIR/root.new
rm -rf --one-file-system "$new"
echo "root24: debootstrap $GC24_SUITE from $mirror into $new"
# Debian 12's debootstrap predates forky: a suite it has no script for is made with sid's
# (every Debian suite since bookworm is bootstrapped the same way).
script=()
[ -e "/usr/share/debootstrap/scripts/$GC24_SUITE" ] || script=(/usr/share/debootstrap/scripts/sid)
debootstrap --variant=minbase --keyring=/usr/share/keyrings/debian-archive-keyring.gpg \
  "$GC24_SUITE" "$new" "$mirror" "${script[@]}" > "$GC24_DIR/debootstrap.log" 2>&1 9>&- \
  || { tail -n 20 "$GC24_DIR/debootstrap.log" >&2; echo "root24: debootstrap failed; see $GC24_DIR/debootstrap.log" >&2; exit 1; }

# No service may start while packages install (there is no init in the root).
printf '#!/bin/sh\nexit 101\n' > "$new/usr/sbin/policy-rc.d"; chmod 0755 "$new/usr/sbin/policy-rc.d"
cp /etc/resolv.conf "$new/etc/resolv.conf" 2>/dev/null || true
root_apt "$new" "$GC24_DIR/apt.log" $PKGS || exit 1
echo "$want" > "$new/.greenup-root"
! grep -qs " $GC24_ROOT/" /proc/mounts || { echo "root24: something is mounted under $GC24_ROOT; not replacing it" >&2; exit 1; }
rm -rf --one-file-system "$GC24_ROOT"; mv "$new" "$GC24_ROOT"
echo "root24: made $GC24_ROOT (Slurm $(gc24_slurm_version))"
echo "$GC24_ROOT"
