#!/usr/bin/env bash
# Build greenup's .deb (and, with RPM=1, its .rpm): release binaries, the SPANK
# plugin built against the installed Slurm headers, and maintainer scripts that
# carry the Slurm series the plugin was built for. Prints the package path.
# GREENUP_SLURM_VERSION_H names another Slurm's slurm_version.h (default: the
# installed /usr/include/slurm/slurm_version.h): the plugin and the package are then
# built for that Slurm's series, e.g. Debian 13's 24.11 from its libslurm-dev.
# MPICC names the MPI compiler wrapper whose mpi.h the MPI runtime is compiled against
# (runtime/build.rs; default mpicc), e.g. another distribution's Open MPI.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
need_debs "${GREENUP_DEBS[@]}" dpkg-dev

header=${GREENUP_SLURM_VERSION_H:-/usr/include/slurm/slurm_version.h}
[ -r "$header" ] || { echo "build-deb: $header not found: install libslurm-dev or set GREENUP_SLURM_VERSION_H" >&2; exit 2; }
number=$(awk '/#define SLURM_VERSION_NUMBER/ {print $3}' "$header")
[ -n "$number" ] || { echo "build-deb: $header has no SLURM_VERSION_NUMBER line" >&2; exit 2; }
series=$(printf '%d.%02d' $(( (number >> 16) & 0xff )) $(( (number >> 8) & 0xff )))
export GREENUP_SLURM_VERSION_H=$header   # plugin/build.rs reads the same header

command -v cargo-deb >/dev/null || cargo install --locked --quiet cargo-deb
release_build

mkdir -p target/packaging/deb-scripts
echo "$series" > target/packaging/slurm-series
sed "s/@SLURM_SERIES@/$series/" packaging/deb/preinst.in > target/packaging/deb-scripts/preinst
cp packaging/deb/postinst packaging/deb/postrm target/packaging/deb-scripts/
chmod 0755 target/packaging/deb-scripts/*
sed "s/@SLURM_SERIES@/$series/" packaging/rpm/pre.in > target/packaging/rpm-pre
# The installed site config: the example, with the installed policy and profile
# directories, and greenupd's socket in the unit's RuntimeDirectory.
sed -e 's|^# greenup site config: an example.*|# greenup site config, as installed by the greenup package: edit it for your site.|' \
    -e 's|^policy_dirs: .*|policy_dirs: [/usr/share/greenup/policies, /etc/slurm/greenup/policies]|' \
    -e 's|^profile_dir: .*|profile_dir: /etc/slurm/greenup/profiles|' \
    -e 's|^\(  socket:\) /run/greenup/greenupd.sock|\1 /run/greenupd/greenupd.sock|' \
    etc/greenup.yaml > target/packaging/greenup.yaml
grep -q '^policy_dirs: \[/usr/share' target/packaging/greenup.yaml && grep -q 'socket: /run/greenupd/' target/packaging/greenup.yaml \
  || { echo "build-deb: etc/greenup.yaml no longer has the lines the package rewrites" >&2; exit 2; }

version=$(cargo metadata --no-deps --format-version 1 | python3 -c 'import json,sys; print([p["version"] for p in json.load(sys.stdin)["packages"] if p["name"]=="greenup"][0])')
deb=$(cargo deb --no-build --no-strip --deb-version "${version}+slurm${series}" | tail -n 1)
[ -f "$deb" ] || { echo "build-deb: cargo deb made no package" >&2; exit 1; }
echo "$deb"
if [ "${RPM:-0}" = 1 ]; then
  command -v cargo-generate-rpm >/dev/null || cargo install --locked --quiet cargo-generate-rpm
  cargo generate-rpm -p . --set-metadata "version = \"${version}\"" --set-metadata "release = \"slurm${series}\"" >/dev/null
  ls target/generate-rpm/*.rpm
fi
