#!/bin/bash
# Install what greenup builds against (scripts/lib.sh: Slurm with its SPANK headers and
# slurmdbd, munge, MariaDB, Open MPI's headers), Python (the stand-in hardware and
# helpers), Open MPI and the real applications, only if they are missing. Safe to run
# repeatedly.
set -euo pipefail
# What greenup builds against (libopenmpi-dev's mpi.h among them: run-tests.sh builds the
# runtime before any other script has installed it) and the applications; scripts/lib.sh
# keeps both lists.
. "$(dirname "$0")/../../scripts/lib.sh"
PKGS="${GREENUP_DEBS[*]} python3 ${GREENUP_APP_DEBS[*]}"
if dpkg -s $PKGS >/dev/null 2>&1; then
  echo "install: slurm, munge, mariadb, Open MPI and the applications already installed"
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends $PKGS >/dev/null
echo "install: installed $PKGS ($(dpkg-query -W -f '${Version}' slurmd))"
