#!/usr/bin/env bash
# Install Debian's munge if it is missing and start munged if it is not running.
# Idempotent; greenup's daemon tests and the cluster tests call it first. Needs root.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
if ! dpkg-query -W -f='${Status}' munge libmunge2 2>/dev/null | grep -c 'install ok installed' | grep -q 2; then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends munge libmunge2 >/dev/null
fi
if [ ! -s /etc/munge/munge.key ]; then
  dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none
fi
chown munge:munge /etc/munge/munge.key
chmod 0400 /etc/munge/munge.key
install -d -o munge -g munge -m 0755 /run/munge
install -d -o munge -g munge -m 0700 /var/lib/munge /var/log/munge
running() { [ -f /run/munge/munged.pid ] && kill -0 "$(cat /run/munge/munged.pid)" 2>/dev/null; }
if ! running; then
  runuser -u munge -- /usr/sbin/munged
  for _ in $(seq 1 50); do [ -S /run/munge/munge.socket.2 ] && break; sleep 0.1; done
fi
munge -n | unmunge >/dev/null
echo "munged is running (pid $(cat /run/munge/munged.pid))"
