# Shared settings for the Slurm 24.11 test cluster in a Debian 13 root. Sourced.
GC24_SUITE=${GC24_SUITE:-trixie}
GC24_DIR=${GC24_DIR:-/var/lib/greenup-test24}
GC24_ROOT=$GC24_DIR/root
GC24_HOSTNAME=greenup-test24   # the root's host name in its own UTS namespace

# The Slurm release installed in the root, e.g. 24.11.5.
gc24_slurm_version() {
  local n; n=$(awk '/#define SLURM_VERSION_NUMBER/ { print $3 }' "$GC24_ROOT/usr/include/slurm/slurm_version.h")
  printf '%d.%02d.%d\n' $(( (n >> 16) & 0xff )) $(( (n >> 8) & 0xff )) $(( n & 0xff ))
}

# Make (or reuse) the root and build greenup for it (tests/slurm24/build.sh) into
# $GC24_STAGE/PROFILE, unless GC_SKIP_BUILD=1 (then the binaries of an earlier build).
# Usage: gc24_stage NAME PROFILE (NAME for messages). Run as root; returns 1 on failure.
gc24_stage() {
  local here; here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  [ "$(id -u)" = 0 ] || { echo "slurm24 $1: run as root" >&2; return 1; }
  GC24_STAGE=${CARGO_TARGET_DIR:-$here/../../target}/slurm24
  "$here/root.sh" >/dev/null || return 1
  [ "${GC_SKIP_BUILD:-0}" = 1 ] || "$here/build.sh" "$2" "$GC24_STAGE/$2"
}
