# Shared settings for the test clusters of the newer Slurm series, each in a Debian root
# of its own made with debootstrap. Sourced. GC_SERIES picks the series:
#   24.11  Debian 13 (trixie), the default
#   26.05  Debian forky (testing), whose slurm-wlm is 26.05
GC_SERIES=${GC_SERIES:-24.11}
case $GC_SERIES in
  24.11) _gc_suite=trixie _gc_tag=24 GC24_DISTRO="Debian 13" ;;
  26.05) _gc_suite=forky _gc_tag=26 GC24_DISTRO="Debian forky" ;;
  *) echo "tests/slurm24: GC_SERIES=$GC_SERIES: expected 24.11 or 26.05" >&2; return 1 ;;
esac
GC24_SUITE=${GC24_SUITE:-$_gc_suite}
GC24_DIR=${GC24_DIR:-/var/lib/greenup-test$_gc_tag}
GC24_ROOT=$GC24_DIR/root
GC24_HOSTNAME=greenup-test$_gc_tag   # the root's host name in its own UTS namespace
# Where each series' build of greenup is staged, under the cargo target directory.
GC24_STAGE_NAME=slurm$_gc_tag
export GC_SERIES

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
  GC24_STAGE=${CARGO_TARGET_DIR:-$here/../../target}/$GC24_STAGE_NAME
  "$here/root.sh" >/dev/null || return 1
  [ "${GC_SKIP_BUILD:-0}" = 1 ] || "$here/build.sh" "$2" "$GC24_STAGE/$2"
}
