/* A two-rank MPI program for the in-job guard's tests (guard.sh).
 *   loop SECONDS [MS]  each rank computes MS ms (10 unless given), then both meet in an
 *         MPI_Barrier, SECONDS × 1000 / MS times: about 1000 / MS synchronising calls a
 *         second, nearly all time computing
 *   imbalance SECONDS [MS]  as loop, but rank 0 computes a tenth of the step and waits
 *         the rest in the barrier: it never leads
 *   nosync SECONDS  each rank computes for SECONDS and makes no MPI call at all
 *   exit SECONDS / term SECONDS  as loop, then each rank exits without MPI_Finalize
 *         (exit(0)) or is killed by SIGTERM
 * Before MPI_Finalize each rank writes the CPU it ran on to cpu-RANK, and rank 0 records
 * every cpufreq control under $GREENUP_SYSFS_ROOT to "during" ("policyN file value");
 * then (except in nosync) the ranks meet in a barrier, so that none has put its clock back
 * before the record. After MPI_Finalize, rank 0 records them to "after". Rank 0 prints
 * how many loops it made. */
#define _GNU_SOURCE
#include <mpi.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void record(const char *dir, const char *name)
{
    const char *root = getenv("GREENUP_SYSFS_ROOT");
    const char *files[] = {"scaling_setspeed", "scaling_max_freq"};
    char out[4096];
    snprintf(out, sizeof out, "%s/%s", dir, name);
    FILE *o = fopen(out, "w");
    if (!root || !o) {
        fprintf(stderr, "guard: cannot record to %s\n", out);
        exit(2);
    }
    for (int p = 0; p < 1024; p++)
        for (int f = 0; f < 2; f++) {
            char path[4096], value[64] = "";
            snprintf(path, sizeof path, "%s/devices/system/cpu/cpufreq/policy%d/%s", root, p,
                     files[f]);
            FILE *i = fopen(path, "r");
            if (!i)
                continue;
            if (fgets(value, sizeof value, i))
                value[strcspn(value, "\n")] = 0;
            fclose(i);
            fprintf(o, "policy%d %s %s\n", p, files[f], value);
        }
    fclose(o);
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static volatile double sink;

/* Compute (a dependent chain of floating-point work) for `secs`. */
static void compute(double secs)
{
    double end = now() + secs, x = 1.0;
    while (now() < end)
        for (int i = 0; i < 1000; i++)
            x = x * 1.0000001 + 1e-9;
    sink = x;
}

int main(int argc, char **argv)
{
    int rank;
    if (argc < 4) {
        fprintf(stderr, "usage: guard MODE DIR SECONDS [MS]\n");
        return 2;
    }
    const char *mode = argv[1], *dir = argv[2];
    double secs = atof(argv[3]), step = argc > 4 ? atof(argv[4]) / 1000 : 0.01;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    long loops = 0;
    if (strcmp(mode, "nosync") == 0) {
        compute(secs);
    } else {
        long n = (long)(secs / step + 0.5);
        for (loops = 0; loops < n; loops++) {
            compute(strcmp(mode, "imbalance") == 0 && rank == 0 ? step / 10 : step);
            MPI_Barrier(MPI_COMM_WORLD);
        }
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/cpu-%d", dir, rank);
    FILE *f = fopen(path, "w");
    if (f) {
        fprintf(f, "%d\n", sched_getcpu());
        fclose(f);
    }
    if (rank == 0) {
        record(dir, "during");
        printf("loops %ld\n", loops);
        fflush(stdout);
    }
    /* Every rank stays (its clock as the guard left it) until rank 0 has recorded. */
    if (strcmp(mode, "nosync") != 0)
        MPI_Barrier(MPI_COMM_WORLD);
    if (strcmp(mode, "exit") == 0)
        exit(0);
    if (strcmp(mode, "term") == 0)
        kill(getpid(), SIGTERM);
    MPI_Finalize();
    if (rank == 0)
        record(dir, "after");
    return 0;
}
