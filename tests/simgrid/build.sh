#!/usr/bin/env bash
# Build the MPI programs greenup runs under SMPI, from Debian source packages fetched with
# a throw-away apt configuration; nothing is committed to greenup. Needs root (Debian
# packages). The programs live under $SIM_CACHE (default /var/lib/greenup-test-sim),
# and a second run only checks they are there.
#   build.sh        NAS EP, IS and DT from SimGrid's source; prints the directory that
#                   holds ep, is and dt
#   build.sh hpl    HPL from hpcc's source, with Debian's reference BLAS; prints the
#                   path of the hpl program (hpl_main.c says how it is run)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
. "$ROOT/scripts/lib.sh"
SIM_CACHE=${SIM_CACHE:-/var/lib/greenup-test-sim}
WHAT=${1:-nas}
# Each cache is keyed by the versions it was built with and by this script (the flags).
SELF=$(sha256sum "${BASH_SOURCE[0]}" | cut -c1-12)

# fetch_orig SOURCE[=VERSION] DIR: the source package's original tarball into DIR, by a
# deb-src line in apt's own state and cache dirs (the system's apt is untouched). Only
# the original tarball is used, so a Debian part the mirror lacks does not matter.
fetch_orig() {
  local apt=$2/apt
  mkdir -p "$apt/state/lists/partial" "$apt/cache/archives/partial"
  echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main" > "$apt/sources.list"
  local opts=(-o "Dir::Etc::SourceList=$apt/sources.list" -o Dir::Etc::SourceParts=/dev/null -o APT::Sandbox::User=root
              -o "Dir::State=$apt/state" -o "Dir::Cache=$apt/cache" -o Dir::State::status=/var/lib/dpkg/status)
  apt-get -qq "${opts[@]}" update
  (cd "$2" && apt-get -qq "${opts[@]}" source --download-only "$1" >/dev/null 2>&1) || true
  compgen -G "$2/${1%%=*}_*.orig.tar.*" >/dev/null ||
    { echo "build.sh: could not download the original source of $1 from deb.debian.org" >&2; exit 1; }
}

case $WHAT in
  nas)
    NAS=$SIM_CACHE/nas
    need_debs libsimgrid-dev dpkg-dev xz-utils
    VERSION="$(dpkg-query -W -f='${Version}' libsimgrid-dev) dt_main-$(sha256sum "$ROOT/tests/simgrid/dt_main.c" | cut -c1-12) build-$SELF"
    if [ -x "$NAS/ep" ] && [ -x "$NAS/is" ] && [ -x "$NAS/dt" ] && [ "$(cat "$NAS/built-with" 2>/dev/null)" = "$VERSION" ]; then
      echo "$NAS"; exit 0
    fi
    SRC_DIR=$(mktemp -d)
    trap 'rm -rf "$SRC_DIR"' EXIT
    SG_VERSION=$(dpkg-query -W -f='${Version}' libsimgrid-dev)
    fetch_orig "simgrid=${SG_VERSION%+b*}" "$SRC_DIR"
    tar -C "$SRC_DIR" -xJf "$SRC_DIR"/simgrid_*.orig.tar.xz --wildcards '*/examples/smpi/NAS/*'
    SRC=$(echo "$SRC_DIR"/simgrid-*/examples/smpi/NAS)
    mkdir -p "$NAS"
    (cd "$SRC" &&
      smpicc -O2 -o "$NAS/ep.tmp" ep.c nas_common.c -lm &&
      smpicc -O2 -o "$NAS/is.tmp" is.c nas_common.c -lm &&
      smpicc -O2 -Dmain=nas_dt_main -c -o "$NAS/dt.o" dt.c &&
      smpicc -O2 -o "$NAS/dt.tmp" "$NAS/dt.o" "$ROOT/tests/simgrid/dt_main.c" nas_common.c DGraph.c -lm &&
      rm -f "$NAS/dt.o")
    for p in ep is dt; do mv "$NAS/$p.tmp" "$NAS/$p"; done
    cp "$SRC/README.install" "$NAS/README.install"
    echo "$VERSION" > "$NAS/built-with"
    echo "$NAS" ;;
  hpl)
    HPL=$SIM_CACHE/hpl
    need_debs libsimgrid-dev dpkg-dev libblas-dev
    VERSION="$(dpkg-query -W -f='${Version}' libsimgrid-dev) blas-$(dpkg-query -W -f='${Version}' libblas-dev) hpl_main-$(sha256sum "$ROOT/tests/simgrid/hpl_main.c" | cut -c1-12) build-$SELF"
    if [ -x "$HPL/hpl" ] && [ "$(cat "$HPL/built-with" 2>/dev/null)" = "$VERSION" ]; then
      echo "$HPL/hpl"; exit 0
    fi
    SRC_DIR=$(mktemp -d)
    trap 'rm -rf "$SRC_DIR"' EXIT
    fetch_orig hpcc "$SRC_DIR"
    tar -C "$SRC_DIR" -xzf "$SRC_DIR"/hpcc_*.orig.tar.gz --wildcards '*/hpl/include/*' '*/hpl/src/*' '*/hpl/testing/*' '*/hpl/COPYRIGHT'
    SRC=$(echo "$SRC_DIR"/hpcc-*/hpl)
    mkdir -p "$HPL"
    # HPL calls BLAS through its C interface (Debian's libblas carries it), and packs
    # what it sends itself (HPL_NO_MPI_DATATYPE) instead of sending MPI derived
    # datatypes: SMPI 3.32's time-independent trace writes a derived datatype as -1,
    # which its replay reads as MPI_DATATYPE_NULL, 0 bytes, so a replayed run would send
    # nothing (greenup-sim refuses such a trace). Its probes go through greenup_iprobe,
    # whose waiting the trace does not record as computation (hpl_main.c says why). Its
    # warnings are not greenup's (-w).
    # shellcheck disable=SC2046
    smpicc -O2 -w -DHPL_CALL_CBLAS -DHPL_NO_MPI_DATATYPE -DMPI_Iprobe=greenup_iprobe -I"$SRC/include" -o "$HPL/hpl.tmp" "$ROOT/tests/simgrid/hpl_main.c" \
      $(find "$SRC/src" "$SRC/testing" -name '*.c' | sort) -lblas -lm
    mv "$HPL/hpl.tmp" "$HPL/hpl"
    cp "$SRC/COPYRIGHT" "$HPL/COPYRIGHT"
    echo "$VERSION" > "$HPL/built-with"
    echo "$HPL/hpl" ;;
  *) echo "build.sh: '$WHAT' is not a program set; valid: nas (the default), hpl" >&2; exit 2 ;;
esac
