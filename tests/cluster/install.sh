#!/bin/bash
# Install Debian's Slurm (controller, compute node, client, SPANK headers, slurmdbd),
# munge, MariaDB (slurmdbd's database), Python (the stand-in hardware and helpers), Open
# MPI and the real applications, only if they are missing. Safe to run repeatedly.
set -euo pipefail
PKGS="slurmctld slurmd slurm-client munge libslurm-dev slurmdbd mariadb-server python3"
# Open MPI and the real applications (scripts/lib.sh keeps that list).
. "$(dirname "$0")/../../scripts/lib.sh"
PKGS="$PKGS ${GREENUP_APP_DEBS[*]}"
if dpkg -s $PKGS >/dev/null 2>&1; then
  echo "install: slurm, munge, mariadb, Open MPI and the applications already installed"
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends $PKGS >/dev/null
echo "install: installed $PKGS ($(dpkg-query -W -f '${Version}' slurmd))"
