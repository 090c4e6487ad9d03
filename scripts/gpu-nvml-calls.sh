#!/bin/bash
# On a machine with an NVIDIA GPU, as root: times each NVML call greenup's prolog makes
# (ctypes, 30 calls each, median), and tries what an ordinary user (uid 65534) may do
# with `greenup gpu` and with NVML itself; then puts the defaults back.
#   bash scripts/gpu-nvml-calls.sh /path/to/greenup [/path/to/libnvidia-ml.so.1]
greenup=${1:?usage: $0 GREENUP_BINARY [NVML_LIBRARY]}
lib=${2:-/usr/local/nvidia/lib64/libnvidia-ml.so.1}
python3 - "$lib" <<'PY'
import ctypes, statistics, sys, time
n = ctypes.CDLL(sys.argv[1])
def t(name, f, k=30):
    xs = []
    for _ in range(k):
        a = time.perf_counter(); r = f(); xs.append((time.perf_counter() - a) * 1e3)
    print(f"{name:48s} median {statistics.median(xs):7.3f} ms  max {max(xs):7.3f} ms  rc {r}")
def cycle():
    n.nvmlInit_v2(); return n.nvmlShutdown()
t("nvmlInit_v2 + nvmlShutdown", cycle, 10)
n.nvmlInit_v2()
h = ctypes.c_void_p()
t("nvmlDeviceGetCount_v2", lambda: n.nvmlDeviceGetCount_v2(ctypes.byref(ctypes.c_uint())))
t("nvmlDeviceGetHandleByIndex_v2", lambda: n.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(h)))
u = ctypes.c_uint(); ull = ctypes.c_ulonglong(); buf = ctypes.create_string_buffer(96)
t("nvmlDeviceGetMinorNumber", lambda: n.nvmlDeviceGetMinorNumber(h, ctypes.byref(u)))
t("nvmlDeviceGetUUID", lambda: n.nvmlDeviceGetUUID(h, buf, 96))
t("nvmlDeviceGetName", lambda: n.nvmlDeviceGetName(h, buf, 96))
t("nvmlDeviceGetTotalEnergyConsumption", lambda: n.nvmlDeviceGetTotalEnergyConsumption(h, ctypes.byref(ull)))
t("nvmlDeviceGetPowerUsage", lambda: n.nvmlDeviceGetPowerUsage(h, ctypes.byref(u)))
t("nvmlDeviceGetPowerManagementLimit", lambda: n.nvmlDeviceGetPowerManagementLimit(h, ctypes.byref(u)))
u2 = ctypes.c_uint()
t("nvmlDeviceGetPowerManagementLimitConstraints", lambda: n.nvmlDeviceGetPowerManagementLimitConstraints(h, ctypes.byref(u), ctypes.byref(u2)))
t("nvmlDeviceGetPowerManagementDefaultLimit", lambda: n.nvmlDeviceGetPowerManagementDefaultLimit(h, ctypes.byref(u)))
t("nvmlDeviceGetClockInfo(SM)", lambda: n.nvmlDeviceGetClockInfo(h, 1, ctypes.byref(u)))
util = (ctypes.c_uint * 2)()
t("nvmlDeviceGetUtilizationRates", lambda: n.nvmlDeviceGetUtilizationRates(h, util))
cnt = ctypes.c_uint(256); clocks = (ctypes.c_uint * 256)()
def sup():
    cnt.value = 256; return n.nvmlDeviceGetSupportedGraphicsClocks(h, ctypes.c_uint(2619), ctypes.byref(cnt), clocks)
t("nvmlDeviceGetSupportedGraphicsClocks", sup)
def supm():
    cnt.value = 256; return n.nvmlDeviceGetSupportedMemoryClocks(h, ctypes.byref(cnt), clocks)
t("nvmlDeviceGetSupportedMemoryClocks", supm)
n.nvmlShutdown()
PY
echo "== as an ordinary user (uid 65534)"
id nobody 2>&1 | head -1
for args in "gpu" "gpu set --power-limit 500" "gpu restore"; do
  echo "-- greenup $args"
  setpriv --reuid 65534 --regid 65534 --clear-groups "$greenup" $args --nvml $lib --run-dir /tmp/gu-user 2>&1 | head -4; echo "exit ${PIPESTATUS[0]}"
done
echo "-- NVML itself, as uid 65534: nvmlDeviceSetPowerManagementLimit"
setpriv --reuid 65534 --regid 65534 --clear-groups python3 -c "
import ctypes; n=ctypes.CDLL('$lib'); n.nvmlInit_v2(); h=ctypes.c_void_p(); n.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(h))
print('rc', n.nvmlDeviceSetPowerManagementLimit(h, 500000), '(4 = NVML_ERROR_NO_PERMISSION)')
print('rc lock', n.nvmlDeviceSetGpuLockedClocks(h, 1000, 1000))
"
nvidia-smi --query-gpu=power.limit,clocks.sm --format=csv
# Put back the defaults in case an ordinary user's call did change them.
nvidia-smi -rgc >/dev/null 2>&1; nvidia-smi -pl "$(nvidia-smi --query-gpu=power.default_limit --format=csv,noheader,nounits | head -1)" >/dev/null 2>&1; nvidia-smi --query-gpu=power.limit --format=csv,noheader
