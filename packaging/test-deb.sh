#!/usr/bin/env bash
# CI test of greenup's .deb: build it, install it with dpkg, check what it installed
# and that its pre-install script refuses another Slurm series, start the test
# cluster from the installed files only (tests/cluster/setup.sh with INSTALLED=1),
# run one energy-policy job end to end as an ordinary user, then remove and purge
# the package. Run as root. The last line is "N passed, M failed".
# GREENUP_DEB=FILE tests that package instead of building one (tests/slurm24/test-deb.sh
# builds the Slurm 24.11 package on the host and tests it in the Debian 13 root this way).
# OTHER_DEB=FILE, a package built for another Slurm series, must be refused here.
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
source scripts/lib.sh
source tests/cluster/lib.sh
[ "$(id -u)" = 0 ] || { echo "test-deb: run as root (it installs a package and starts Slurm daemons)"; echo "0 passed, 1 failed"; exit 1; }

PASSED=0 FAILED=0
say() { echo "    $*"; }
check() { # NAME COMMAND...: one PASS or FAIL line
  local name=$1; shift
  if "$@"; then PASSED=$((PASSED + 1)); echo "PASS $name"; else FAILED=$((FAILED + 1)); echo "FAIL $name"; fi
}
cluster_up=0 installed=0 CONTROL="" KEEP=""
finish() {
  [ "$cluster_up" = 1 ] && tests/cluster/teardown.sh >/dev/null 2>&1
  [ "$installed" = 1 ] && dpkg --purge greenup >/dev/null 2>&1
  rm -rf "$CONTROL" "$KEEP"
  echo "$PASSED passed, $FAILED failed"
  [ "$FAILED" = 0 ] && [ "$PASSED" -gt 0 ]
}
trap finish EXIT
SERIES_PLUGIN_DIR=/usr/lib/x86_64-linux-gnu/slurm-wlm

DEB=${GREENUP_DEB:-}
if [ -n "${OTHER_DEB:-}" ]; then
  # cargo deb replaces the packages it made before: keep a copy of the other one.
  KEEP=$(mktemp -d); cp "$OTHER_DEB" "$KEEP/" && OTHER_DEB=$KEEP/$(basename "$OTHER_DEB")
fi
if [ -z "$DEB" ]; then
  need_debs "${GREENUP_DEBS[@]}" jq dpkg-dev || { FAILED=$((FAILED + 1)); exit 1; }
  step "building the .deb"
  DEB=$(bash packaging/build-deb.sh | tail -n 1)
fi
if [ ! -f "$DEB" ]; then
  FAILED=$((FAILED + 1)); echo "FAIL build: packaging/build-deb.sh printed no package ('$DEB')"; exit 1
fi
# The series the package was built for, from its version (VERSION+slurmSERIES).
SERIES=$(dpkg-deb -f "$DEB" Version | sed -n 's/.*+slurm//p')
say "$DEB ($(du -h "$DEB" | cut -f1)), built for Slurm $SERIES beside Slurm $(dpkg-query -W -f='${Version}' slurm-wlm-basic-plugins)"
CONTROL=$(mktemp -d)   # the package's own maintainer scripts
dpkg-deb -e "$DEB" "$CONTROL"

step "installing it"
# One Slurm test cluster per machine: wait for another run (tests/cluster/run-tests.sh) to end.
for _ in $(seq 1 60); do pgrep -x slurmctld >/dev/null || break; sleep 5; done
if pgrep -x slurmctld >/dev/null; then
  FAILED=$((FAILED + 1)); echo "FAIL a slurmctld is still running after 5 minutes; stop it first (tests/cluster/teardown.sh)"; exit 1
fi
tests/cluster/teardown.sh >/dev/null 2>&1   # leftovers of an interrupted cluster run
dpkg --purge greenup >/dev/null 2>&1 || true
other_refused() {
  local out other_series
  other_series=$(dpkg-deb -f "$OTHER_DEB" Version | sed -n 's/.*+slurm//p')
  [ "$other_series" != "$SERIES" ] || { say "$OTHER_DEB is built for Slurm $SERIES too"; return 1; }
  if out=$(dpkg -i "$OTHER_DEB" 2>&1); then say "the package for Slurm $other_series installed beside Slurm $SERIES"; return 1; fi
  grep -qF "greenup: this package's SPANK plugin was built for Slurm $other_series, but Slurm $SERIES" <<<"$out" \
    && grep -qF "Install the greenup package built for Slurm $SERIES." <<<"$out" || { say "dpkg -i said: $out"; return 1; }
  dpkg-query -W -f='${Status}' greenup 2>/dev/null | grep -q 'install ok installed' && { say "dpkg lists it as installed"; return 1; }
  [ ! -e $SERIES_PLUGIN_DIR/spank_greenup.so ] || { say "its plugin is in $SERIES_PLUGIN_DIR"; return 1; }
  say "$(grep -m1 "built for Slurm" <<<"$out")"
}
if [ -n "${OTHER_DEB:-}" ]; then
  check "dpkg -i refuses the package built for another Slurm series and installs nothing" other_refused
  dpkg --purge greenup >/dev/null 2>&1 || true
fi
install_deb() {
  dpkg -i "$DEB" >/tmp/greenup-dpkg.log 2>&1 && return 0
  # Missing dependencies: let apt bring them in and finish the configuration.
  DEBIAN_FRONTEND=noninteractive apt-get install -f -y -qq >>/tmp/greenup-dpkg.log 2>&1 &&
    dpkg-query -W -f='${Status}' greenup 2>/dev/null | grep -q 'install ok installed' && return 0
  cat /tmp/greenup-dpkg.log; return 1
}
check "dpkg -i installs the package" install_deb && installed=1
[ "$installed" = 1 ] || exit 1

files=$(dpkg -L greenup)
has_files() {
  local ok=0 f
  for f in /usr/bin/greenup /usr/sbin/greenupd /usr/sbin/greenup-prolog-slurmctld $SERIES_PLUGIN_DIR/spank_greenup.so /usr/lib/greenup/libgreenup_mpi.so \
           /etc/slurm/greenup.yaml /etc/slurm/plugstack.conf.d/greenup.conf \
           /usr/share/greenup/cli_filter.lua /usr/share/greenup/slurm-series \
; do
    grep -qx "$f" <<<"$files" || { say "not in dpkg -L greenup: $f"; ok=1; }
  done
  grep -Eqx '(/usr)?/lib/systemd/system/greenupd.service' <<<"$files" || { say "not in dpkg -L greenup: greenupd.service"; ok=1; }
  for f in policies/*.yaml; do
    grep -qx "/usr/share/greenup/$f" <<<"$files" || { say "policy not installed: $f"; ok=1; }
  done
  for f in man1/greenup.1 man8/greenupd.8 man8/spank_greenup.8 man8/greenup-prolog-slurmctld.8 man5/greenup.yaml.5; do
    grep -Eqx "/usr/share/man/$f(\.gz)?" <<<"$files" || { say "man page not installed: $f"; ok=1; }
  done
  return $ok
}
check "the package holds the plugin, binaries, config, policies, unit and man pages" has_files
conffiles() {
  local c; c=$(dpkg-query -W -f='${Conffiles}' greenup)
  grep -q ' /etc/slurm/greenup.yaml ' <<<"$c " && grep -q ' /etc/slurm/plugstack.conf.d/greenup.conf ' <<<"$c " \
    || { say "conffiles: $c"; return 1; }
}
check "the site config and plugstack line are conffiles" conffiles
runs() {
  /usr/bin/greenup --version >/dev/null && /usr/sbin/greenupd --check-config --config /etc/slurm/greenup.yaml >/dev/null \
    || { say "installed binaries fail on the installed config"; return 1; }
  [ "$(cat /usr/share/greenup/slurm-series)" = "$SERIES" ] || { say "slurm-series: $(cat /usr/share/greenup/slurm-series)"; return 1; }
  [ "$(stat -c %U /var/lib/greenup)" = greenup ] || { say "/var/lib/greenup owned by $(stat -c %U /var/lib/greenup 2>&1)"; return 1; }
}
check "installed binaries accept the installed config; state directory and series recorded" runs

refuses() {
  local tmp out rc installed_version
  installed_version=$(dpkg-query -W -f='${Version}' slurm-wlm-basic-plugins)
  tmp=$(mktemp -d)
  sed 's/^BUILT_FOR=.*/BUILT_FOR="99.99"/' "$CONTROL/preinst" > "$tmp/preinst"
  out=$(sh "$tmp/preinst" install 2>&1); rc=$?
  sh "$CONTROL/preinst" install >/dev/null 2>&1 || { say "the real preinst refuses Slurm $installed_version"; rm -rf "$tmp"; return 1; }
  rm -rf "$tmp"
  [ $rc != 0 ] || { say "a package for Slurm 99.99 installed beside $installed_version"; return 1; }
  grep -qF "greenup: this package's SPANK plugin was built for Slurm 99.99, but Slurm $installed_version is installed." <<<"$out" \
    && grep -qF "Install the greenup package built for Slurm $SERIES." <<<"$out" || { say "message: $out"; return 1; }
  say "$(head -n 1 <<<"$out")"
}
check "preinst refuses another Slurm series and says why" refuses

step "the test cluster from the installed files (INSTALLED=1)"
cluster_up=1
if ! INSTALLED=1 tests/cluster/setup.sh; then
  FAILED=$((FAILED + 1)); echo "FAIL cluster setup from the installed files"; exit 1
fi
from_installed() {
  local ok=0
  grep -q "^optional $SERIES_PLUGIN_DIR/spank_greenup.so " $GC_ETC/plugstack.conf.d/greenup.conf || { say "plugstack: $(cat $GC_ETC/plugstack.conf.d/greenup.conf)"; ok=1; }
  [ ! -e "$GC_RUN/plugin.installed" ] || { say "setup copied a plugin over the package's"; ok=1; }
  grep -q '^local GREENUP = "/usr/bin/greenup"' $GC_ETC/cli_filter.lua || { say "cli_filter does not run /usr/bin/greenup"; ok=1; }
  grep -q '^policy_dirs: \[/usr/share/greenup/policies\]' $GC_ETC/greenup.yaml || { say "site config policy_dirs: $(grep policy_dirs $GC_ETC/greenup.yaml)"; ok=1; }
  [ "$(readlink -f /proc/"$(cat "$GC_RUN/greenupd.pid")"/exe)" = /usr/sbin/greenupd ] || { say "greenupd is not /usr/sbin/greenupd"; ok=1; }
  [ ! -e "$GC_SHARE/bin" ] || [ -z "$(ls -A "$GC_SHARE/bin")" ] || say "note: $GC_SHARE/bin holds binaries of an earlier run (unused)"
  return $ok
}
check "the cluster runs the package's plugin, greenupd, CLI and policies" from_installed

as_user() { runuser -u "$GC_USER" -- bash -c 'cd "$1" && shift && exec "$@"' as "$GC_WORK" "$@"; }
JOB=""
job_applied() {
  install -m 0755 tests/cluster/jobs/read-freqs.sh "$GC_WORK/read-freqs.sh"
  JOB=$(as_user sbatch --parsable -N 4 --exclusive -t 5 --energy-policy=max-dist --energy-profile=solver \
        --energy-report -o "$GC_WORK/deb-%j.out" "$GC_WORK/read-freqs.sh" "$GC_SYSFS") || { say "sbatch failed"; return 1; }
  for _ in $(seq 1 300); do [ -z "$(squeue -h -j "$JOB" 2>/dev/null)" ] && break; sleep 0.2; done
  local st; st=$(scontrol show job "$JOB" | grep -o 'JobState=[A-Z_]*' | cut -d= -f2)
  [ "$st" = COMPLETED ] || { say "job $JOB ended $st"; cat "$GC_WORK/deb-$JOB.out"; return 1; }
  local json; json=$(/usr/bin/greenup job "$JOB" --json) || { say "greenup job $JOB failed"; return 1; }
  [ "$(jq -r .decision.verdict <<<"$json")" = planned ] || { say "decision: $json"; return 1; }
  local ok=0 seen=0 node pol gov khz ghz want
  while read -r _ node pol gov khz; do
    ghz=$(jq -r ".decision.plan.nodes[] | select(.name == \"$node\") | .freq_ghz" <<<"$json")
    want=$(awk -v g="$ghz" 'BEGIN { printf "%d", g * 1000000 + 0.5 }')
    if [ -z "$ghz" ] || [ $(( khz > want ? khz - want : want - khz )) -gt 1000 ]; then
      say "$node $pol ran at $khz kHz; greenupd decided ${ghz:-nothing} GHz"; ok=1
    fi
    seen=$((seen + 1))
  done < <(grep '^freq ' "$GC_WORK/deb-$JOB.out")
  [ "$seen" = $((4 * GC_CPUS)) ] || { say "expected $((4 * GC_CPUS)) readings, got $seen"; cat "$GC_WORK/deb-$JOB.out"; ok=1; }
  say "decision: $(jq -r '[.decision.plan.nodes[] | "\(.name)=\(.freq_ghz) GHz"] | join(", ")' <<<"$json")"
  say "$(grep "^greenup: job $JOB" "$GC_WORK/deb-$JOB.out")"
  return $ok
}
check "a max-dist job runs at greenupd's per-node decision" job_applied
report() {
  [ -n "$JOB" ] || return 1
  local r; r=$(as_user /usr/bin/greenup report "$JOB") || { say "greenup report $JOB as $GC_USER failed"; return 1; }
  grep -q "^Job $JOB  user $GC_USER" <<<"$r" && grep -q '^Policy *max-dist' <<<"$r" || { say "report:"; echo "$r"; return 1; }
  for n in $GC_NODES; do grep -Eq "^ *$n +[a-z]+ +[0-9.]+ +applied +rapl " <<<"$r" || { say "no applied, measured row for $n:"; echo "$r"; return 1; }; done
}
check "the job's owner reads its report: every node applied and measured" report

step "removing the package"
tests/cluster/teardown.sh >/dev/null 2>&1; cluster_up=0
removed() {
  dpkg -r greenup >/dev/null || { say "dpkg -r failed"; return 1; }
  [ ! -e $SERIES_PLUGIN_DIR/spank_greenup.so ] || { say "plugin left in $SERIES_PLUGIN_DIR"; return 1; }
  [ ! -e /usr/bin/greenup ] && [ ! -e /usr/sbin/greenupd ] || { say "binaries left"; return 1; }
  [ -e /etc/slurm/greenup.yaml ] || { say "dpkg -r removed the conffile /etc/slurm/greenup.yaml"; return 1; }
  dpkg --purge greenup >/dev/null || { say "dpkg --purge failed"; return 1; }
  installed=0
  [ ! -e /etc/slurm/greenup.yaml ] && [ ! -e /etc/slurm/plugstack.conf.d/greenup.conf ] || { say "conffiles left after purge"; return 1; }
  [ ! -e $SERIES_PLUGIN_DIR/spank_greenup.so ] || { say "plugin left after purge"; return 1; }
  [ ! -e /var/lib/greenup ] || { say "purge left /var/lib/greenup: $(ls -A /var/lib/greenup)"; return 1; }
  [ ! -e /etc/slurm/greenup ] || { say "purge left /etc/slurm/greenup: $(find /etc/slurm/greenup)"; return 1; }
}
check "dpkg -r removes the plugin and binaries; purge removes the conffiles, the state and the empty site directories" removed
kept() {
  # A site's own profile survives a purge, and so does the directory holding it.
  install_deb || return 1
  installed=1
  echo "# the site's own" > /etc/slurm/greenup/profiles/mine.yaml
  dpkg --purge greenup >/dev/null || { say "dpkg --purge failed"; return 1; }
  installed=0
  [ -f /etc/slurm/greenup/profiles/mine.yaml ] || { say "purge removed the site's own profile"; return 1; }
  [ ! -e /etc/slurm/greenup/policies ] || { say "purge left the empty policies directory"; return 1; }
  rm -rf /etc/slurm/greenup
}
check "purge keeps the site's own profiles and removes only empty directories" kept
