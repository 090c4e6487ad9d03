#!/bin/bash
# Build one sysfs tree per test node, laid out like the kernel's cpufreq and powercap
# trees. n1-n2 ("fast") offer the userspace governor, so greenup sets scaling_setspeed;
# n3-n4 ("eco") offer only performance/powersave like intel_pstate, so greenup caps
# scaling_max_freq. n4's RAPL counter starts just below its range so that it wraps
# during the first job. Its range (10 kJ, two minutes at n4's 80 W) is small enough to
# wrap in the tests and large enough that no test or demo job wraps it twice: greenup
# reads the counters at a job's start and end only (docs/failure-and-security.md).
# Each package zone has RAPL's two power limits as a kernel shows them (powermodel.py
# enforces them): the long-term one (PL1) at the package's TDP, which is the node's full
# power, static + dynamic at f_max (setup.sh's node specs: fast 40 + 120 W, eco 20 +
# 60 W), so a job at f_max is never throttled by the default, over Intel's default window
# (976562 us); the short-term one (PL2) at 1.25 x TDP over 2440 us, which the stand-in
# can never reach. max_power_uw: the TDP for PL1 (the kernel shows the package's thermal
# spec power there), 1.25 x TDP for PL2. The files are root's, mode 0644, in directories
# of mode 0755: an ordinary user can neither write nor replace them.
# Usage: sysfs.sh [ROOT]
set -euo pipefail
. "$(dirname "$0")/lib.sh"
ROOT=${1:-$GC_SYSFS}

w() { printf '%s\n' "$2" > "$1"; chmod 0644 "$1"; }

node_tree() { # node freqs(desc, kHz) governors governor max_range start_uj tdp_w
  local node=$1 freqs=$2 govs=$3 gov=$4 range=$5 start=$6 tdp=$(($7 * 1000000))
  local t=$ROOT/$node hi lo
  hi=$(echo $freqs | tr ' ' '\n' | sort -n | tail -1)
  lo=$(echo $freqs | tr ' ' '\n' | sort -n | head -1)
  rm -rf "$t"
  for cpu in $(seq 0 $((GC_CPUS - 1))); do
    local p=$t/devices/system/cpu/cpufreq/policy$cpu
    mkdir -p "$p" "$t/devices/system/cpu/cpu$cpu"
    w $p/affected_cpus "$cpu"
    w $p/related_cpus "$cpu"
    w $p/scaling_available_frequencies "$freqs"
    w $p/scaling_available_governors "$govs"
    w $p/scaling_governor "$gov"
    w $p/scaling_driver "$([ "$govs" = "performance powersave" ] && echo intel_pstate || echo acpi-cpufreq)"
    w $p/cpuinfo_min_freq "$lo"
    w $p/cpuinfo_max_freq "$hi"
    w $p/scaling_min_freq "$lo"
    w $p/scaling_max_freq "$hi"
    w $p/scaling_cur_freq "$hi"
    w $p/scaling_setspeed "<unsupported>"
  done
  local z=$t/class/powercap/intel-rapl:0
  mkdir -p "$z" "$z/intel-rapl:0:0"
  chmod 0755 "$t/class" "$t/class/powercap" "$z" "$z/intel-rapl:0:0"
  w $z/name package-0
  w $z/enabled 1
  w $z/energy_uj "$start"
  w $z/max_energy_range_uj "$range"
  w $z/constraint_0_name long_term
  w $z/constraint_0_power_limit_uw "$tdp"
  w $z/constraint_0_time_window_us 976562
  w $z/constraint_0_max_power_uw "$tdp"
  w $z/constraint_1_name short_term
  w $z/constraint_1_power_limit_uw $((tdp * 5 / 4))
  w $z/constraint_1_time_window_us 2440
  w $z/constraint_1_max_power_uw $((tdp * 5 / 4))
  w $z/intel-rapl:0:0/name core
  w $z/intel-rapl:0:0/energy_uj 0
  w $z/intel-rapl:0:0/max_energy_range_uj "$range"
}

# Each pair's P-states (kHz, descending), its PL1 (W), and n4's counter range and start.
if [ "$GC_PHYSICS" = published ]; then
  # tests/cluster/published.yaml: the CPUs' P-states; PL1 at the node's sockets' TDP. n4's
  # counter starts 2 kJ below the top of RAPL's usual range, so it still wraps in the first
  # job, and a long job cannot wrap it twice.
  HI="2500000 2200000 1500000" HI_TDP=360
  LO="2000000" LO_TDP=240
  N4_RANGE=262143328850 N4_START=262141328850
else
  HI="3000000 2600000 2200000 1800000 1400000 1000000" HI_TDP=160
  LO="2400000 2000000 1600000 1200000" LO_TDP=80
  N4_RANGE=10000000000 N4_START=9995000000
fi
node_tree n1 "$HI" "userspace ondemand performance powersave" ondemand 262143328850 1000000 $HI_TDP
node_tree n2 "$HI" "userspace ondemand performance powersave" ondemand 262143328850 5000000 $HI_TDP
node_tree n3 "$LO" "performance powersave" powersave 262143328850 0 $LO_TDP
node_tree n4 "$LO" "performance powersave" powersave $N4_RANGE $N4_START $LO_TDP
echo "sysfs: trees for $GC_NODES under $ROOT ($GC_PHYSICS physics)"
