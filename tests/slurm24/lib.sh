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
