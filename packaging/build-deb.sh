#!/usr/bin/env bash
# Build greenup's .deb (and, with RPM=1, its .rpm): release binaries, the SPANK
# plugin built against the installed Slurm headers, and maintainer scripts that
# carry the Slurm series the plugin was built for. Prints the package path.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
need_debs "${GREENUP_DEBS[@]}" dpkg-dev

header=/usr/include/slurm/slurm_version.h
[ -r "$header" ] || { echo "build-deb: $header not found: install libslurm-dev" >&2; exit 2; }
number=$(awk '/#define SLURM_VERSION_NUMBER/ {print $3}' "$header")
series=$(printf '%d.%02d' $(( (number >> 16) & 0xff )) $(( (number >> 8) & 0xff )))

command -v cargo-deb >/dev/null || cargo install --locked --quiet cargo-deb
cargo build --release --workspace --quiet

mkdir -p target/packaging/deb-scripts
echo "$series" > target/packaging/slurm-series
sed "s/@SLURM_SERIES@/$series/" packaging/deb/preinst.in > target/packaging/deb-scripts/preinst
cp packaging/deb/postinst target/packaging/deb-scripts/postinst
chmod 0755 target/packaging/deb-scripts/*
sed "s/@SLURM_SERIES@/$series/" packaging/rpm/pre.in > target/packaging/rpm-pre

version=$(cargo metadata --no-deps --format-version 1 | python3 -c 'import json,sys; print([p["version"] for p in json.load(sys.stdin)["packages"] if p["name"]=="greenup"][0])')
deb=$(cargo deb --no-build --no-strip --deb-version "${version}+slurm${series}" 2>/dev/null | tail -n 1)
echo "$deb"
if [ "${RPM:-0}" = 1 ]; then
  command -v cargo-generate-rpm >/dev/null || cargo install --locked --quiet cargo-generate-rpm
  cargo generate-rpm -p . --set-metadata "version = \"${version}\"" --set-metadata "release = \"slurm${series}\"" >/dev/null
  ls target/generate-rpm/*.rpm
fi
