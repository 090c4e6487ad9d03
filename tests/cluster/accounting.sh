#!/bin/bash
# Slurm accounting for the test cluster: MariaDB and slurmdbd on localhost, so sacct
# answers as on a production cluster (ConsumedEnergy is 0: there is no energy plugin).
# Usage: accounting.sh start|stop. "start" needs slurm.conf written (sacctmgr reads it)
# and runs before slurmctld, which then registers with slurmdbd on its own.
# A MariaDB already running is used and left running; one started here is stopped.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
DB=greenup_test_acct
DBUSER=greenup_test
DBPASS=greenup-test-only
CONF=$GC_ETC/slurmdbd.conf
MARIADB_PID=/run/mysqld/mariadb-greenup-test.pid

db_up() { mariadb -e 'select 1' >/dev/null 2>&1; }
# Run "$@" without the descriptors this shell inherited beyond stdin, stdout and stderr.
# slurmdbd and mariadbd keep whatever they inherit: the cluster lock's descriptor among
# them would hold the lock for as long as they run, and a caller's pipe would never close.
without_fds() {
  (
    for fd in /proc/$BASHPID/fd/*; do
      fd=${fd##*/}
      [ "$fd" -gt 2 ] && eval "exec $fd>&-"
    done
    exec "$@"
  )
}

case "${1:-}" in
  start)
    set -e
    if ! db_up; then
      install -d -o mysql -g root /run/mysqld
      # mariadbd writes its own pid file (as user mysql): $! would be a subshell's pid.
      without_fds nohup /usr/sbin/mariadbd --user=mysql --bind-address=127.0.0.1 \
        --pid-file="$MARIADB_PID" > "$GC_LOG/mariadb.log" 2>&1 &
      touch "$GC_RUN/mariadb-started"
      for _ in $(seq 1 100); do db_up && break; sleep 0.1; done
      db_up || { echo "accounting.sh: MariaDB did not start; see $GC_LOG/mariadb.log" >&2; exit 1; }
    fi
    # A fresh database each run: job ids restart with every cluster.
    mariadb -e "DROP DATABASE IF EXISTS $DB; CREATE DATABASE $DB;
      CREATE USER IF NOT EXISTS '$DBUSER'@'localhost' IDENTIFIED BY '$DBPASS';
      GRANT ALL ON $DB.* TO '$DBUSER'@'localhost'; FLUSH PRIVILEGES;"
    if [ -f "$CONF" ] && [ ! -f "$GC_RUN/slurmdbd.conf.saved" ] && ! grep -qs "greenup-test" "$CONF"; then
      cp -p "$CONF" "$GC_RUN/slurmdbd.conf.saved"
    fi
    cat > "$CONF" <<CONF
# greenup-test: written by tests/cluster/accounting.sh, removed by teardown.sh
AuthType=auth/munge
DbdHost=localhost
DbdPort=17119
SlurmUser=root
DebugLevel=info
LogFile=$GC_LOG/slurmdbd.log
PidFile=$GC_RUN/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=$DBUSER
StoragePass=$DBPASS
StorageLoc=$DB
CONF
    chmod 600 "$CONF"   # slurmdbd refuses a conf others can read: it holds a password
    gc_stop_pidfile "$GC_RUN/slurmdbd.pid"
    without_fds slurmdbd
    for _ in $(seq 1 100); do sacctmgr -n list cluster >/dev/null 2>&1 && break; sleep 0.1; done
    sacctmgr -i add cluster "$GC_NAME" >/dev/null
    sacctmgr -i add account greenup-test >/dev/null
    sacctmgr -i add user "root,$GC_USER,$GC_USER2" account=greenup-test >/dev/null
    ;;
  stop)
    gc_stop_pidfile "$GC_RUN/slurmdbd.pid"
    if [ -f "$GC_RUN/mariadb-started" ]; then
      gc_stop_pidfile "$MARIADB_PID"
      rm -f "$GC_RUN/mariadb-started"
    fi
    grep -qs greenup-test "$CONF" && rm -f "$CONF"
    [ -f "$GC_RUN/slurmdbd.conf.saved" ] && mv -f "$GC_RUN/slurmdbd.conf.saved" "$CONF"
    true ;;
  *) echo "usage: accounting.sh start|stop" >&2; exit 2 ;;
esac
