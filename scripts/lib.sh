# Shared helpers for greenup's scripts: progress lines, Debian package installs and
# test ports. Sourced, not run.

# Print a progress line with the elapsed time since the script started.
step() {
  printf '\n==> [%4ds] %s\n' "$SECONDS" "$*"
}

# Install Debian packages that are missing; quiet when everything is present.
need_debs() {
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# The Debian packages greenup builds and runs against (slurmdbd and MariaDB: the test
# cluster's accounting; debootstrap: the Debian 13 root of the Slurm 24.11 tests;
# libopenmpi-dev: mpicc and mpi.h, which the MPI runtime in runtime/ is compiled against,
# needed before the first cargo build; python3-yaml: the test cluster's stand-in reads
# tests/physics/cpus.yaml).
GREENUP_DEBS=(slurmctld slurmd slurm-client slurm-wlm-basic-plugins munge libmunge2 libslurm-dev lua5.3 gcc libc6-dev pkg-config jq sqlite3 python3-yaml slurmdbd mariadb-server debootstrap libopenmpi-dev)

# Debian's Open MPI and the real applications the test cluster runs (LAMMPS, NWChem,
# HPCC; tests/cluster/apps/). libpmix-dev holds the libpmix.so that Slurm's PMIx plugin
# loads for srun --mpi=pmix. About 410 MiB installed, 40 s to install.
GREENUP_APP_DEBS=(openmpi-bin libpmix-dev lammps lammps-examples nwchem hpcc)

# Build every release binary greenup's scripts use, in one cargo call: the package's
# (greenupd, greenup, the plugin, the MPI runtime, greenup-sim) and the daemon suites'
# load tools (examples loadgen and herd). One call settles one set of crate features,
# so the packaging finds the daemon suites' build done; apart, the two feature sets
# rebuilt most crates, about 5 minutes of the test command on 2 CPUs.
release_build() {
  cargo build --release --quiet --workspace --lib --bins --example loadgen --example herd
}

# A loopback TCP port for a test's own greenupd, printed on stdout. It lies below the
# kernel's ephemeral range, where no client connection can hold it (a 2,000-node herd
# opens thousands, and a random port in that range was once taken: "Address already in
# use"), above the test cluster's fixed ports (17100-17470), and nothing bound it when
# picked (a port in TIME_WAIT counts as taken).
free_port() {
  python3 - <<'PY'
import random, socket
lo = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
for _ in range(200):
    port = random.randrange(20000, lo)
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            continue
    print(port)
    break
else:
    raise SystemExit("free_port: no free port in 20000-%d" % (lo - 1))
PY
}
