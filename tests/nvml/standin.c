/* A stand-in for NVML (libnvidia-ml.so.1), for greenup's tests only.
 *
 * It exports the NVML calls greenup uses, backed by plain files under the directory
 * named by GREENUP_NVML_STANDIN_DIR (read by this library only; greenup itself never
 * reads it), or, without that variable, by the file beside this library named as it
 * with ".dir" added (for processes started with no environment, as the prolog's GPU
 * worker is). Layout: DIR/count holds the number of GPUs; DIR/now_ns, if present, is the
 * clock in nanoseconds (tests advance it; otherwise CLOCK_REALTIME); DIR/N/ holds GPU N's
 * files, described in tests/nvml/README.md.
 *
 * The closed form (one GPU):
 *   S          the supported SM clocks (file sm_clocks), fmax = max S
 *   [lo, hi]   the locked range (file locked), else [min S, max S]
 *   u          utilization / 100 (file util)
 *   P(f)       = idle_mw + dyn_mw * u * (f / fmax)^3            milliwatts
 *   clock      u == 0: the lowest clock of S in [lo, hi];
 *              else the highest clock of S in [lo, hi] with P(f) <= limit_mw,
 *              else (no clock fits the limit) the lowest clock of S in [lo, hi]
 *   power      round(P(clock))                                  milliwatts
 *   energy     advances by power * (now - stamp) / 1e9 mJ at every energy read and
 *              before every change of limit or lock (files energy_mj, stamp_ns)
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_GPUS 64
#define MAX_CLOCKS 256

enum {
	SUCCESS = 0, UNINITIALIZED = 1, INVALID_ARGUMENT = 2, NOT_SUPPORTED = 3,
	NO_PERMISSION = 4, NOT_FOUND = 6, INSUFFICIENT_SIZE = 7, DRIVER_NOT_LOADED = 9,
	UNKNOWN = 999
};

struct dev { unsigned index; };
static struct dev devs[MAX_GPUS];
static int initialised;

typedef struct { unsigned gpu; unsigned memory; } util_t;

static char beside[4096];

static const char *dir(void)
{
	const char *env = getenv("GREENUP_NVML_STANDIN_DIR");
	if (env) return env;
	if (!beside[0]) {
		Dl_info info;
		char p[4096];
		if (!dladdr((void *)&devs, &info) || !info.dli_fname) return NULL;
		snprintf(p, sizeof p, "%s.dir", info.dli_fname);
		FILE *f = fopen(p, "r");
		if (!f) return NULL;
		size_t got = fread(beside, 1, sizeof beside - 1, f);
		fclose(f);
		beside[got] = 0;
		while (got && (beside[got - 1] == '\n' || beside[got - 1] == ' ')) beside[--got] = 0;
	}
	return beside[0] ? beside : NULL;
}

static int path(char *out, size_t n, const struct dev *d, const char *file)
{
	const char *base = dir();
	if (!base) return -1;
	if (d) snprintf(out, n, "%s/%u/%s", base, d->index, file);
	else snprintf(out, n, "%s/%s", base, file);
	return 0;
}

static int read_text(const struct dev *d, const char *file, char *buf, size_t n)
{
	char p[4096];
	if (path(p, sizeof p, d, file)) return -1;
	FILE *f = fopen(p, "r");
	if (!f) return -1;
	size_t got = fread(buf, 1, n - 1, f);
	fclose(f);
	buf[got] = 0;
	while (got && (buf[got - 1] == '\n' || buf[got - 1] == ' ')) buf[--got] = 0;
	return 0;
}

static int read_num(const struct dev *d, const char *file, double *v)
{
	char buf[256];
	if (read_text(d, file, buf, sizeof buf)) return -1;
	char *end;
	*v = strtod(buf, &end);
	return end == buf ? -1 : 0;
}

static int write_text(const struct dev *d, const char *file, const char *text)
{
	char p[4096], tmp[4200];
	if (path(p, sizeof p, d, file)) return -1;
	snprintf(tmp, sizeof tmp, "%s.tmp", p);
	FILE *f = fopen(tmp, "w");
	if (!f) return -1;
	fputs(text, f);
	fputc('\n', f);
	if (fclose(f)) return -1;
	return rename(tmp, p);
}

static void log_write(const struct dev *d, const char *what)
{
	char p[4096];
	if (path(p, sizeof p, d, "writes")) return;
	FILE *f = fopen(p, "a");
	if (f) { fprintf(f, "%s\n", what); fclose(f); }
}

/* A refusal configured for one control: the file holds NO_PERMISSION or NOT_SUPPORTED. */
static unsigned refusal(const struct dev *d, const char *control)
{
	char file[128], buf[64];
	snprintf(file, sizeof file, "refuse_%s", control);
	if (read_text(d, file, buf, sizeof buf)) return SUCCESS;
	if (!strcmp(buf, "NO_PERMISSION")) return NO_PERMISSION;
	if (!strcmp(buf, "NOT_SUPPORTED")) return NOT_SUPPORTED;
	return UNKNOWN;
}

static double now_ns(void)
{
	double v;
	if (!read_num(NULL, "now_ns", &v)) return v;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int clocks(const struct dev *d, unsigned *out, unsigned *n)
{
	char buf[4096];
	if (read_text(d, "sm_clocks", buf, sizeof buf)) return -1;
	*n = 0;
	for (char *s = strtok(buf, " ,\n"); s && *n < MAX_CLOCKS; s = strtok(NULL, " ,\n"))
		out[(*n)++] = (unsigned)strtoul(s, NULL, 10);
	return *n ? 0 : -1;
}

struct state { double idle, dyn, u, limit; unsigned sm, fmax; double power; };

static int state(const struct dev *d, struct state *st)
{
	unsigned c[MAX_CLOCKS], n, fmin = ~0u, fmax = 0, lo, hi;
	double util;
	if (clocks(d, c, &n) || read_num(d, "idle_mw", &st->idle) || read_num(d, "dyn_mw", &st->dyn)
	    || read_num(d, "util", &util) || read_num(d, "limit_mw", &st->limit))
		return -1;
	for (unsigned i = 0; i < n; i++) {
		if (c[i] < fmin) fmin = c[i];
		if (c[i] > fmax) fmax = c[i];
	}
	lo = fmin; hi = fmax;
	char buf[128];
	if (!read_text(d, "locked", buf, sizeof buf) && buf[0])
		sscanf(buf, "%u %u", &lo, &hi);
	st->u = util / 100.0;
	st->fmax = fmax;
	unsigned best = 0, lowest = ~0u;
	for (unsigned i = 0; i < n; i++) {
		if (c[i] < lo || c[i] > hi) continue;
		if (c[i] < lowest) lowest = c[i];
		double p = st->idle + st->dyn * st->u * pow((double)c[i] / fmax, 3);
		if (p <= st->limit && c[i] > best) best = c[i];
	}
	if (lowest == ~0u) lowest = fmin;
	st->sm = (st->u == 0.0 || best == 0) ? lowest : best;
	st->power = round(st->idle + st->dyn * st->u * pow((double)st->sm / fmax, 3));
	return 0;
}

/* Bring the energy counter up to now at the power in force, and return it (mJ). */
static int settle(const struct dev *d, double *energy)
{
	struct state st;
	double e, stamp, now = now_ns();
	char buf[64];
	if (state(d, &st) || read_num(d, "energy_mj", &e)) return -1;
	if (read_num(d, "stamp_ns", &stamp)) stamp = now;
	if (now > stamp) e += st.power * (now - stamp) / 1e9;
	snprintf(buf, sizeof buf, "%.3f", e);
	if (write_text(d, "energy_mj", buf)) return -1;
	snprintf(buf, sizeof buf, "%.0f", now);
	if (write_text(d, "stamp_ns", buf)) return -1;
	*energy = e;
	return 0;
}

#define DEV(h) ((const struct dev *)(h))
#define READY(h) do { if (!initialised) return UNINITIALIZED; if (!(h)) return INVALID_ARGUMENT; } while (0)

unsigned nvmlInit_v2(void)
{
	double n;
	if (!dir() || read_num(NULL, "count", &n)) return DRIVER_NOT_LOADED;
	for (unsigned i = 0; i < MAX_GPUS; i++) devs[i].index = i;
	initialised = 1;
	return SUCCESS;
}

unsigned nvmlShutdown(void) { initialised = 0; return SUCCESS; }

const char *nvmlErrorString(unsigned r)
{
	switch (r) {
	case SUCCESS: return "Success";
	case UNINITIALIZED: return "Uninitialized";
	case INVALID_ARGUMENT: return "Invalid Argument";
	case NOT_SUPPORTED: return "Not Supported";
	case NO_PERMISSION: return "Insufficient Permissions";
	case NOT_FOUND: return "Not Found";
	case INSUFFICIENT_SIZE: return "Insufficient Size";
	case DRIVER_NOT_LOADED: return "Driver Not Loaded";
	default: return "Unknown Error";
	}
}

unsigned nvmlDeviceGetCount_v2(unsigned *count)
{
	double n;
	if (!initialised) return UNINITIALIZED;
	if (read_num(NULL, "count", &n) || n < 0 || n > MAX_GPUS) return UNKNOWN;
	*count = (unsigned)n;
	return SUCCESS;
}

unsigned nvmlDeviceGetHandleByIndex_v2(unsigned index, void **handle)
{
	unsigned n;
	unsigned r = nvmlDeviceGetCount_v2(&n);
	if (r) return r;
	if (index >= n) return INVALID_ARGUMENT;
	*handle = &devs[index];
	return SUCCESS;
}

static unsigned get_uint(void *h, const char *file, unsigned *out)
{
	double v;
	READY(h);
	if (read_num(DEV(h), file, &v)) return UNKNOWN;
	*out = (unsigned)v;
	return SUCCESS;
}

static unsigned get_text(void *h, const char *file, char *out, unsigned len)
{
	char buf[256];
	READY(h);
	if (read_text(DEV(h), file, buf, sizeof buf)) return UNKNOWN;
	if (strlen(buf) + 1 > len) return INSUFFICIENT_SIZE;
	strcpy(out, buf);
	return SUCCESS;
}

unsigned nvmlDeviceGetMinorNumber(void *h, unsigned *m) { return get_uint(h, "minor", m); }
unsigned nvmlDeviceGetUUID(void *h, char *s, unsigned n) { return get_text(h, "uuid", s, n); }
unsigned nvmlDeviceGetName(void *h, char *s, unsigned n) { return get_text(h, "name", s, n); }

unsigned nvmlDeviceGetTotalEnergyConsumption(void *h, unsigned long long *mj)
{
	double e;
	READY(h);
	unsigned r = refusal(DEV(h), "energy");
	if (r) return r;
	if (settle(DEV(h), &e)) return UNKNOWN;
	*mj = (unsigned long long)floor(e);
	return SUCCESS;
}

unsigned nvmlDeviceGetPowerUsage(void *h, unsigned *mw)
{
	struct state st;
	READY(h);
	unsigned r = refusal(DEV(h), "power");
	if (r) return r;
	if (state(DEV(h), &st)) return UNKNOWN;
	*mw = (unsigned)st.power;
	return SUCCESS;
}

unsigned nvmlDeviceGetClockInfo(void *h, unsigned type, unsigned *mhz)
{
	struct state st;
	READY(h);
	if (type != 1 && type != 0) return NOT_SUPPORTED; /* SM and graphics are one clock here */
	if (state(DEV(h), &st)) return UNKNOWN;
	*mhz = st.sm;
	return SUCCESS;
}

unsigned nvmlDeviceGetUtilizationRates(void *h, util_t *u)
{
	READY(h);
	if (get_uint(h, "util", &u->gpu)) return UNKNOWN;
	u->memory = 0;
	return SUCCESS;
}

unsigned nvmlDeviceGetPowerManagementLimit(void *h, unsigned *mw) { return get_uint(h, "limit_mw", mw); }
unsigned nvmlDeviceGetPowerManagementDefaultLimit(void *h, unsigned *mw) { return get_uint(h, "limit_default_mw", mw); }

unsigned nvmlDeviceGetPowerManagementLimitConstraints(void *h, unsigned *min, unsigned *max)
{
	unsigned r = get_uint(h, "limit_min_mw", min);
	return r ? r : get_uint(h, "limit_max_mw", max);
}

unsigned nvmlDeviceSetPowerManagementLimit(void *h, unsigned mw)
{
	unsigned min, max;
	double e;
	char buf[64];
	READY(h);
	unsigned r = refusal(DEV(h), "power_limit");
	if (r) return r;
	if ((r = nvmlDeviceGetPowerManagementLimitConstraints(h, &min, &max))) return r;
	if (mw < min || mw > max) return INVALID_ARGUMENT;
	if (settle(DEV(h), &e)) return UNKNOWN;
	snprintf(buf, sizeof buf, "%u", mw);
	if (write_text(DEV(h), "limit_mw", buf)) return UNKNOWN;
	snprintf(buf, sizeof buf, "power_limit %u", mw);
	log_write(DEV(h), buf);
	return SUCCESS;
}

unsigned nvmlDeviceGetSupportedMemoryClocks(void *h, unsigned *count, unsigned *mhz)
{
	unsigned m;
	READY(h);
	if (get_uint(h, "mem_clock", &m)) return UNKNOWN;
	if (*count < 1) { *count = 1; return INSUFFICIENT_SIZE; }
	mhz[0] = m;
	*count = 1;
	return SUCCESS;
}

unsigned nvmlDeviceGetSupportedGraphicsClocks(void *h, unsigned mem, unsigned *count, unsigned *mhz)
{
	unsigned m, c[MAX_CLOCKS], n;
	READY(h);
	if (get_uint(h, "mem_clock", &m) || clocks(DEV(h), c, &n)) return UNKNOWN;
	if (mem != m) return NOT_FOUND;
	if (*count < n) { *count = n; return INSUFFICIENT_SIZE; }
	memcpy(mhz, c, n * sizeof *c);
	*count = n;
	return SUCCESS;
}

unsigned nvmlDeviceSetGpuLockedClocks(void *h, unsigned lo, unsigned hi)
{
	unsigned c[MAX_CLOCKS], n, fmin = ~0u, fmax = 0;
	double e;
	char buf[64];
	READY(h);
	unsigned r = refusal(DEV(h), "locked_clocks");
	if (r) return r;
	if (clocks(DEV(h), c, &n)) return UNKNOWN;
	for (unsigned i = 0; i < n; i++) {
		if (c[i] < fmin) fmin = c[i];
		if (c[i] > fmax) fmax = c[i];
	}
	if (lo > hi || lo < fmin || hi > fmax) return INVALID_ARGUMENT;
	if (settle(DEV(h), &e)) return UNKNOWN;
	snprintf(buf, sizeof buf, "%u %u", lo, hi);
	if (write_text(DEV(h), "locked", buf)) return UNKNOWN;
	snprintf(buf, sizeof buf, "lock %u %u", lo, hi);
	log_write(DEV(h), buf);
	return SUCCESS;
}

unsigned nvmlDeviceResetGpuLockedClocks(void *h)
{
	double e;
	READY(h);
	unsigned r = refusal(DEV(h), "locked_clocks");
	if (r) return r;
	if (settle(DEV(h), &e)) return UNKNOWN;
	if (write_text(DEV(h), "locked", "")) return UNKNOWN;
	log_write(DEV(h), "unlock");
	return SUCCESS;
}
