/* Paper 002's (PASCoL) displaced-ring benchmark over MPI one-sided calls: for each
 * operation (Put, Get, Accumulate, strided Put) and message size, every rank in turn
 * targets each other rank (displacement 1 .. n-1) and completes each transfer before the
 * next, as ARMCI's blocking calls do.
 *
 * Synchronization: one passive-target epoch (MPI_Win_lock_all) per point. Each transfer
 * is request-based (MPI_Rput, MPI_Rget, MPI_Raccumulate) and waited for with MPI_Wait, then
 * completed at the target with MPI_Win_flush (ARMCI's "fence to dest"); a Get is complete
 * when its MPI_Wait returns, so it needs no flush (as in the paper). The MPI_Wait is
 * where a runtime can wait by blocking instead of polling.
 *
 * Energy: ENERGY_FILE (each node's RAPL-like energy_uj) is read before and after each
 * point. The stand-in hardware advances that counter once per tick and writes it whole,
 * so the power over a point is (E1 - E0) over the time between the two updates (the
 * file's mtimes), times the point's duration; the ranks' energies are summed.
 *
 * Output (rank 0, CSV on stdout):
 *   op,bytes,reps,ops,time_s,latency_us,energy_j,mib,energy_j_per_mib
 * where ops = reps * (n - 1) transfers per rank, latency = time / ops, and MiB counts
 * the bytes all ranks moved.
 * Usage: ring_rma [SECONDS_PER_POINT [MIN_BYTES [MAX_BYTES [FACTOR [OPS]]]]]
 *   defaults 2, 1024, 4194304, 4, "put,get,acc,sput". */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Strided Put: blocks of this many bytes, every other block (MPI_Type_vector). */
#define BLOCK 256

static int rank, nproc;
static MPI_Win win;
static char *base, *src;
static size_t slot; /* bytes each origin owns in each target's window */

static int bad(const char *what)
{
    if (rank == 0) fprintf(stderr, "ring_rma: %s\n", what);
    MPI_Abort(MPI_COMM_WORLD, 2);
    return 2;
}

/* One transfer of `bytes` of kind `op` to `dest`, completed at the target. */
static void transfer(const char *op, size_t bytes, int dest)
{
    MPI_Request req;
    MPI_Aint disp = (MPI_Aint)(rank * slot);
    if (strcmp(op, "put") == 0) {
        MPI_Rput(src, (int)bytes, MPI_BYTE, dest, disp, (int)bytes, MPI_BYTE, win, &req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        MPI_Win_flush(dest, win);
    } else if (strcmp(op, "get") == 0) {
        MPI_Rget(src, (int)bytes, MPI_BYTE, dest, disp, (int)bytes, MPI_BYTE, win, &req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
    } else if (strcmp(op, "acc") == 0) {
        int n = (int)(bytes / sizeof(double));
        MPI_Raccumulate(src, n, MPI_DOUBLE, dest, disp, n, MPI_DOUBLE, MPI_SUM, win, &req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        MPI_Win_flush(dest, win);
    } else { /* sput: `bytes` of data in blocks of BLOCK, every other block, both sides */
        MPI_Datatype vec;
        MPI_Type_vector((int)(bytes / BLOCK), BLOCK, 2 * BLOCK, MPI_BYTE, &vec);
        MPI_Type_commit(&vec);
        MPI_Rput(src, 1, vec, dest, disp, 1, vec, win, &req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        MPI_Win_flush(dest, win);
        MPI_Type_free(&vec);
    }
}

static double round_of(const char *op, size_t bytes, long reps)
{
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (long r = 0; r < reps; r++)
        for (int i = 1; i < nproc; i++) transfer(op, bytes, (rank + i) % nproc);
    MPI_Barrier(MPI_COMM_WORLD);
    return MPI_Wtime() - t0;
}

/* The counter (µJ) and when it was last updated (s). */
static void energy(const char *file, double *uj, double *when)
{
    struct stat st;
    FILE *f = fopen(file, "r");
    if (!f || fscanf(f, "%lf", uj) != 1 || fstat(fileno(f), &st) != 0) {
        fprintf(stderr, "ring_rma: rank %d: cannot read %s\n", rank, file);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    fclose(f);
    *when = (double)st.st_mtim.tv_sec + st.st_mtim.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nproc);
    double seconds = argc > 1 ? atof(argv[1]) : 2.0;
    size_t lo = argc > 2 ? strtoull(argv[2], NULL, 10) : 1024;
    size_t hi = argc > 3 ? strtoull(argv[3], NULL, 10) : 4u << 20;
    size_t factor = argc > 4 ? strtoull(argv[4], NULL, 10) : 4;
    char ops[64];
    snprintf(ops, sizeof ops, "%s", argc > 5 ? argv[5] : "put,get,acc,sput");
    const char *efile = getenv("ENERGY_FILE");
    const char *erange = getenv("ENERGY_RANGE_UJ");
    double range = erange ? atof(erange) : 0;
    if (nproc < 2) return bad("needs at least 2 ranks");
    if (seconds <= 0 || lo < BLOCK || hi < lo || factor < 2 || lo % BLOCK)
        return bad("SECONDS > 0, MIN_BYTES >= 256 and a multiple of 256, MAX >= MIN, FACTOR >= 2");

    /* Each origin owns a slot of each window, twice the largest message (strided Put). */
    slot = 2 * hi;
    MPI_Win_allocate((MPI_Aint)(slot * nproc), 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    src = malloc(slot);
    if (!src) return bad("out of memory");
    for (size_t i = 0; i < slot / sizeof(double); i++) ((double *)src)[i] = 1.0;
    memset(base, 0, slot * nproc);
    if (rank == 0) printf("op,bytes,reps,ops,time_s,latency_us,energy_j,mib,energy_j_per_mib\n");

    for (char *op = strtok(ops, ","); op; op = strtok(NULL, ",")) {
        if (strcmp(op, "put") && strcmp(op, "get") && strcmp(op, "acc") && strcmp(op, "sput"))
            return bad("OPS: a comma-separated list of put, get, acc, sput");
        for (size_t bytes = lo; bytes <= hi; bytes *= factor) {
            MPI_Win_lock_all(0, win);
            /* Calibrate: double the repetitions until a round lasts 0.1 s (the slowest
             * rank decides, so every rank runs the same count). */
            long reps = 1;
            double t;
            for (;;) {
                double mine = round_of(op, bytes, reps);
                MPI_Allreduce(&mine, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
                if (t >= 0.1 || reps >= (1L << 30)) break;
                reps *= 2;
            }
            reps = (long)ceil(reps * seconds / t);
            double e0 = 0, m0 = 0, e1 = 0, m1 = 0;
            MPI_Barrier(MPI_COMM_WORLD);
            if (efile) energy(efile, &e0, &m0);
            double mine = round_of(op, bytes, reps);
            if (efile) energy(efile, &e1, &m1);
            MPI_Win_unlock_all(win);
            MPI_Allreduce(&mine, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            double de = e1 - e0;
            if (de < 0 && range > 0) de += range; /* the counter wrapped */
            double joules = (efile && m1 > m0) ? de * 1e-6 / (m1 - m0) * mine : NAN;
            double total;
            MPI_Reduce(&joules, &total, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
            long n = reps * (nproc - 1);
            double mib = (double)bytes * n * nproc / (1 << 20);
            if (rank == 0)
                printf("%s,%zu,%ld,%ld,%.6f,%.3f,%.4f,%.4f,%.5f\n", op, bytes, reps, n, t,
                       t / n * 1e6, total, mib, total / mib);
            fflush(stdout);
        }
    }
    MPI_Win_free(&win);
    free(src);
    MPI_Finalize();
    return 0;
}
