#!/bin/bash
# The package test on Slurm 24.11: build greenup's .deb for the Debian 13 root's Slurm
# on this host (packaging/build-deb.sh with GREENUP_SLURM_VERSION_H), then run
# packaging/test-deb.sh on it inside the root (install, files, series guard, a job on the
# test cluster from the installed files, remove, purge), and the MPI runtime's mechanism
# tests on the library it ships (compiled against the root's Open MPI 5). The package
# for another series (the newest one packaging/test-deb.sh built here, if any) must be
# refused with dpkg -i in the root, and this package must be refused by dpkg -i on this
# host.
# Run as root, under the host cluster's lock like packaging/test-deb.sh: the root's test
# cluster shares the stand-in's cgroups with the host's, and the host's package test
# installs greenup too (flock /tmp/greenup-cluster.lock bash tests/slurm24/test-deb.sh).
# The last line is "N passed, M failed".
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
REPO=$(cd "$HERE/../.." && pwd)
. "$REPO/scripts/lib.sh"
[ "$(id -u)" = 0 ] || { echo "slurm24 test-deb: run as root"; echo "0 passed, 1 failed"; exit 1; }
fail() { echo "FAIL $*"; echo "0 passed, 1 failed"; exit 1; }
cd "$REPO"
"$HERE/root.sh" >/dev/null || fail "could not make the $GC24_DISTRO root"

TARGET=${CARGO_TARGET_DIR:-$REPO/target}
STAGE=$TARGET/$GC24_STAGE_NAME/debs
rm -rf "$STAGE"; mkdir -p "$STAGE"
# The newest package of another series, kept before cargo deb replaces it with this one.
SERIES=$(gc24_slurm_version | cut -d. -f1,2)
OTHER=$(ls -t "$TARGET"/debian/greenup_*+slurm*.deb 2>/dev/null | grep -v "+slurm$SERIES[-_]" | head -n 1)
[ -z "$OTHER" ] || cp "$OTHER" "$STAGE/"

step "building the .deb for Slurm $(gc24_slurm_version)"
# The MPI runtime in it is compiled against the root's Open MPI 5 (tests/slurm24/mpicc.sh).
DEB=$(GREENUP_SLURM_VERSION_H=$GC24_ROOT/usr/include/slurm/slurm_version.h MPICC=$HERE/mpicc.sh bash packaging/build-deb.sh | tail -n 1)
[ -f "$DEB" ] || fail "packaging/build-deb.sh printed no package ('$DEB')"
SERIES=$(dpkg-deb -f "$DEB" Version | sed -n 's/.*+slurm//p')
cp "$DEB" "$STAGE/"
env=(GREENUP_DEB=/greenup-bin/debs/$(basename "$DEB"))
if [ -n "$OTHER" ]; then
  env+=(OTHER_DEB=/greenup-bin/debs/$(basename "$OTHER"))
else
  echo "    no package for another Slurm series built here yet (packaging/test-deb.sh builds one)"
fi

step "installing and running it in the $GC24_DISTRO root"
out=$(mktemp)
GC24_BIN=$(dirname "$STAGE") "$HERE/enter.sh" env "${env[@]}" bash /greenup/packaging/test-deb.sh | tee "$out"
summary=$(tail -n 1 "$out"); rm -f "$out"
passed=$(sed -n 's/^\([0-9]*\) passed.*/\1/p' <<<"$summary"); failed=$(sed -n 's/.* \([0-9]*\) failed$/\1/p' <<<"$summary")
passed=${passed:-0}; failed=${failed:-1}

step "the package's MPI runtime with $GC24_DISTRO's Open MPI (tests/runtime/run.sh in the root)"
dpkg-deb -x "$DEB" "$STAGE/files"
GC24_BIN=$(dirname "$STAGE") "$HERE/enter.sh" env GREENUP_MPI_LIB=/greenup-bin/debs/files/usr/lib/greenup/libgreenup_mpi.so \
  bash /greenup/tests/runtime/run.sh > "$STAGE/runtime.log" 2>&1
rc=$?; sed 's/^/    /' "$STAGE/runtime.log"
if [ $rc = 0 ]; then
  passed=$((passed + 1)); echo "PASS the package's libgreenup_mpi.so passes the runtime's mechanism tests with $GC24_DISTRO's Open MPI"
else
  failed=$((failed + 1)); echo "FAIL the package's libgreenup_mpi.so passes the runtime's mechanism tests with $GC24_DISTRO's Open MPI"
fi

step "dpkg -i of the Slurm $SERIES package on this host (Slurm $(dpkg-query -W -f='${Version}' slurm-wlm-basic-plugins 2>/dev/null))"
host_refuses() {
  local out rc host
  host=$(dpkg-query -W -f='${Version}' slurm-wlm-basic-plugins 2>/dev/null) || { echo "    no Slurm on this host"; return 1; }
  local before; before=$(dpkg-query -W -f='${Status}' greenup 2>/dev/null)
  out=$(dpkg -i "$DEB" 2>&1); rc=$?
  if ! grep -q ' installed$' <<<"$before"; then
    dpkg-query -W -f='${Status}' greenup 2>/dev/null | grep -q ' installed$' && { echo "    dpkg lists greenup as installed"; return 1; }
    dpkg --purge greenup >/dev/null 2>&1   # dpkg keeps a refused package selected for install
  fi
  [ $rc != 0 ] && grep -qF "built for Slurm $SERIES, but Slurm $host is installed" <<<"$out" || { echo "    dpkg -i said: $out"; return 1; }
  echo "    $(grep -m1 "built for Slurm" <<<"$out")"
}
if host_refuses; then
  passed=$((passed + 1)); echo "PASS dpkg -i on the Debian 12 host refuses the package built for Slurm $SERIES"
else
  failed=$((failed + 1)); echo "FAIL dpkg -i on the Debian 12 host refuses the package built for Slurm $SERIES"
fi
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
