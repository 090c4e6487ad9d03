#!/usr/bin/env bash
# CI test of greenup's .rpm on this Debian machine, with Debian's rpm tools: build it,
# check its files, config files and scriptlets, install it into a scratch root and
# verify and erase it there, and run its pre-install script against a real rpm
# database holding a Slurm of the same series, of another series, and none. The
# Slurm packages in that database are empty packages made here with rpmbuild, since
# this machine's Slurm is Debian's. Run as root. The last line is "N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

PASSED=0 FAILED=0
say() { echo "    $*"; }
check() { # NAME COMMAND...: one PASS or FAIL line
  local name=$1; shift
  if "$@"; then PASSED=$((PASSED + 1)); echo "PASS $name"; else FAILED=$((FAILED + 1)); echo "FAIL $name"; fi
}
SCRATCH=$(mktemp -d /tmp/greenup-rpm.XXXXXX)
finish() {
  rm -rf "$SCRATCH"
  echo "$PASSED passed, $FAILED failed"
  [ "$FAILED" = 0 ] && [ "$PASSED" -gt 0 ]
}
trap finish EXIT
need_debs "${GREENUP_DEBS[@]}" rpm dpkg-dev || { FAILED=$((FAILED + 1)); exit 1; }

step "building the .rpm"
RPM_FILE=$(RPM=1 bash packaging/build-deb.sh | tail -n 1)
if [ ! -f "$RPM_FILE" ]; then
  FAILED=$((FAILED + 1)); echo "FAIL build: packaging/build-deb.sh printed no .rpm ('$RPM_FILE')"; exit 1
fi
SERIES=$(cat target/packaging/slurm-series)
say "$RPM_FILE ($(du -h "$RPM_FILE" | cut -f1)), built for Slurm $SERIES"

files=$(rpm -qlp "$RPM_FILE" 2>/dev/null)
has_files() {
  local ok=0 f
  for f in /usr/bin/greenup /usr/sbin/greenupd /usr/sbin/greenup-prolog-slurmctld /usr/lib64/slurm/spank_greenup.so /usr/lib/greenup/libgreenup_mpi.so \
           /etc/slurm/greenup.yaml /etc/slurm/plugstack.conf.d/greenup.conf \
           /usr/lib/systemd/system/greenupd.service /usr/share/greenup/cli_filter.lua \
           /usr/share/greenup/slurm-series /usr/share/man/man8/greenupd.8 \
           /usr/share/man/man1/greenup.1 /usr/share/man/man5/greenup.yaml.5 /usr/share/man/man8/spank_greenup.8; do
    grep -qx "$f" <<<"$files" || { say "not in rpm -qlp: $f"; ok=1; }
  done
  for f in policies/*.yaml; do
    grep -qx "/usr/share/greenup/$f" <<<"$files" || { say "policy not packaged: $f"; ok=1; }
  done
  local conf; conf=$(rpm -qcp "$RPM_FILE" 2>/dev/null)
  [ "$(sort <<<"$conf" | tr '\n' ' ')" = "/etc/slurm/greenup.yaml /etc/slurm/plugstack.conf.d/greenup.conf " ] \
    || { say "config files: $conf"; ok=1; }
  grep -q "^optional /usr/lib64/slurm/spank_greenup.so " packaging/greenup-rpm.conf || { say "plugstack line: $(cat packaging/greenup-rpm.conf)"; ok=1; }
  return $ok
}
check "the .rpm holds the plugin in /usr/lib64/slurm, binaries, config files, unit, policies and man pages" has_files

scripts_ok() {
  local s; s=$(rpm -qp --scripts "$RPM_FILE" 2>/dev/null)
  grep -q '^preinstall scriptlet' <<<"$s" && grep -q "BUILT_FOR=\"$SERIES\"" <<<"$s" \
    && grep -q '^postinstall scriptlet' <<<"$s" && grep -q 'useradd --system' <<<"$s" \
    && grep -q '^postuninstall scriptlet' <<<"$s" || { say "scriptlets:"; echo "$s"; return 1; }
}
check "its scriptlets carry the Slurm series, create the greenup user and clean up on erase" scripts_ok

ROOT=$SCRATCH/root
in_root() {
  mkdir -p "$ROOT"
  rpm --root "$ROOT" --initdb || return 1
  # --noscripts: the scriptlets would run chrooted in a root with no shell; they are tested below.
  rpm --root "$ROOT" -i --nodeps --noscripts "$RPM_FILE" 2>/dev/null || { say "rpm -i failed"; return 1; }
  [ "$(stat -c %a "$ROOT/usr/sbin/greenupd")" = 755 ] && [ "$(stat -c %a "$ROOT/usr/lib64/slurm/spank_greenup.so")" = 644 ] \
    || { say "modes: $(stat -c '%n %a' "$ROOT/usr/sbin/greenupd" "$ROOT/usr/lib64/slurm/spank_greenup.so")"; return 1; }
  cmp -s "$ROOT/usr/sbin/greenupd" target/release/greenupd || { say "installed greenupd differs from the build"; return 1; }
  grep -q '^policy_dirs: \[/usr/share/greenup/policies, /etc/slurm/greenup/policies\]' "$ROOT/etc/slurm/greenup.yaml" \
    || { say "installed config: $(grep policy_dirs "$ROOT/etc/slurm/greenup.yaml")"; return 1; }
  rpm --root "$ROOT" -V --nodeps greenup || { say "rpm -V reports changed files"; return 1; }
  rpm --root "$ROOT" -e --noscripts greenup 2>/dev/null || { say "rpm -e failed"; return 1; }
  [ ! -e "$ROOT/usr/sbin/greenupd" ] && [ ! -e "$ROOT/usr/lib64/slurm/spank_greenup.so" ] || { say "files left after rpm -e"; return 1; }
}
check "rpm installs it into a scratch root, verifies it and erases it" in_root

# A real rpm database with an empty "slurm" package of VERSION in it; the pre-install
# script's `rpm -q slurm` reads it through HOME/.rpmmacros.
slurm_db() { # DIR VERSION (empty VERSION: no slurm at all)
  local dir=$1 version=$2 top=$1/build
  mkdir -p "$dir/db" "$top/SPECS"
  echo "%_dbpath $dir/db" > "$dir/.rpmmacros"
  HOME=$dir rpm --initdb || return 1
  [ -n "$version" ] || return 0
  cat > "$top/SPECS/slurm.spec" <<SPEC
Name: slurm
Version: $version
Release: 1
Summary: empty stand-in for an installed Slurm
License: GPL-2.0-or-later
BuildArch: noarch
%description
An empty package: only its name and version matter to greenup's pre-install script.
%files
SPEC
  HOME=$dir rpmbuild -bb --quiet --define "_topdir $top" "$top/SPECS/slurm.spec" >/dev/null 2>&1 || { say "rpmbuild failed"; return 1; }
  HOME=$dir rpm -i --nodeps "$top"/RPMS/noarch/slurm-"$version"-1.noarch.rpm 2>/dev/null || return 1
}
rpm -qp --qf '%{PREIN}' "$RPM_FILE" > "$SCRATCH/pre.sh" 2>/dev/null
pre_in() { # VERSION: run the pre-install script beside that Slurm; prints its stderr
  local dir; dir=$(mktemp -d "$SCRATCH/db.XXXXXX")
  slurm_db "$dir" "$1" || return 2
  HOME=$dir sh "$SCRATCH/pre.sh" 2>&1 >/dev/null
}
guard() {
  local out rc other
  other=$(awk -v s="$SERIES" 'BEGIN { split(s, v, "."); printf "%d.%02d.4", v[1] + 1, v[2] }')
  out=$(pre_in "$other"); rc=$?
  [ $rc = 1 ] || { say "beside Slurm $other the pre-install script exited $rc"; return 1; }
  grep -qF "greenup: this package's SPANK plugin was built for Slurm $SERIES, but Slurm $other is installed" <<<"$out" \
    || { say "message: $out"; return 1; }
  say "$out"
  out=$(pre_in "$SERIES.8") || { say "beside Slurm $SERIES.8 it refused: $out"; return 1; }
  out=$(pre_in "") || { say "with no Slurm rpm it refused: $out"; return 1; }
}
check "the pre-install script refuses another Slurm series, says why, and accepts its own" guard
