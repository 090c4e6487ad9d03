#!/bin/bash
# Install Debian's Slurm (controller, compute node, client, SPANK headers), its Lua
# cli_filter and munge, only if they are missing. Safe to run repeatedly.
set -euo pipefail
PKGS="slurmctld slurmd slurm-client munge libslurm-dev"
if dpkg -s $PKGS >/dev/null 2>&1; then
  echo "install: slurm and munge already installed"
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends $PKGS >/dev/null
echo "install: installed $PKGS ($(dpkg-query -W -f '${Version}' slurmd))"
