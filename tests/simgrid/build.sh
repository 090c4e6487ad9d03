#!/usr/bin/env bash
# Fetch SimGrid's Debian source package (which carries NAS EP, IS and DT for SMPI) with a
# throw-away apt configuration, and build the three programs with smpicc. Nothing is
# committed to greenup: the programs live under $SIM_CACHE (default
# /var/lib/greenup-test-sim), and a second run only checks they are there. Needs root
# (Debian packages). Prints the directory that holds ep, is and dt.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
. "$ROOT/scripts/lib.sh"
SIM_CACHE=${SIM_CACHE:-/var/lib/greenup-test-sim}
NAS=$SIM_CACHE/nas
need_debs libsimgrid-dev dpkg-dev xz-utils
# The cache is keyed by SimGrid's version and by how greenup builds the programs (DT's
# entry point, dt_main.c).
VERSION="$(dpkg-query -W -f='${Version}' libsimgrid-dev) dt_main-$(sha256sum "$ROOT/tests/simgrid/dt_main.c" | cut -c1-12)"
if [ -x "$NAS/ep" ] && [ -x "$NAS/is" ] && [ -x "$NAS/dt" ] && [ "$(cat "$NAS/built-with" 2>/dev/null)" = "$VERSION" ]; then
  echo "$NAS"; exit 0
fi
APT=$(mktemp -d)
trap 'rm -rf "$APT"' EXIT
mkdir -p "$APT/state/lists/partial" "$APT/cache/archives/partial" "$APT/src"
# Only a deb-src line, in apt's own state and cache dirs: the system's apt is untouched.
echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main" > "$APT/sources.list"
OPTS=(-o "Dir::Etc::SourceList=$APT/sources.list" -o Dir::Etc::SourceParts=/dev/null -o APT::Sandbox::User=root
      -o "Dir::State=$APT/state" -o "Dir::Cache=$APT/cache" -o Dir::State::status=/var/lib/dpkg/status)
apt-get -qq "${OPTS[@]}" update
SG_VERSION=$(dpkg-query -W -f='${Version}' libsimgrid-dev)
(cd "$APT/src" && apt-get -qq "${OPTS[@]}" source --download-only "simgrid=${SG_VERSION%+b*}" >/dev/null 2>&1)
tar -C "$APT/src" -xJf "$APT"/src/simgrid_*.orig.tar.xz --wildcards '*/examples/smpi/NAS/*'
SRC=$(echo "$APT"/src/simgrid-*/examples/smpi/NAS)
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
echo "$NAS"
