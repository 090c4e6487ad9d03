/* The bench's cross-check program (test-only): a bulk-synchronous loop with the same
 * work on every rank and one small collective after each step, every few milliseconds.
 *
 * With equal work per rank, the ranks on the faster nodes finish each step first and
 * wait in the collective for the slower ones. Slowing only the waiting nodes, down to
 * the speed of the slowest, should then cost no time: on real hardware a waiting core
 * loses nothing to its lower clock. tests/cluster/README.md records what the bench
 * measures for that decision, and docs/evaluation.md compares it with SimGrid's.
 *
 * Usage: bsp [STEPS [WORK]]   (defaults 2000 and 600000: about 1 ms of one host core
 *        per step on the test machine). Each step is WORK iterations of a dependent
 *        floating-point recurrence, then an MPI_Allreduce of one double.
 * Prints, from rank 0: "bsp: P ranks, STEPS steps of WORK: wall W s", one line per rank
 * "bsp rank R NODE: compute C s, wait M s", and "bsp check: SUM X" where SUM must be
 * STEPS * P (P + 1) / 2 (the allreduce of rank + 1 at every step) and X is the
 * recurrence's value, the same on every rank (tests/cluster/apps/check.py checks both). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* WORK steps of x <- x * a + b with |a| < 1: the result depends on every step, so the
 * compiler cannot drop or shorten the loop, and it stays bounded. */
static double work(double x, long n)
{
    for (long i = 0; i < n; i++)
        x = x * 0.999999 + 0.5;
    return x;
}

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long steps = argc > 1 ? atol(argv[1]) : 2000;
    long per = argc > 2 ? atol(argv[2]) : 600000;
    if (steps <= 0 || per <= 0) {
        if (rank == 0)
            fprintf(stderr, "bsp: STEPS and WORK must be positive integers, got '%s' '%s'\n",
                    argc > 1 ? argv[1] : "", argc > 2 ? argv[2] : "");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    double x = 1.0, sum = 0.0, compute = 0.0, wait = 0.0;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (long s = 0; s < steps; s++) {
        double a = MPI_Wtime();
        x = work(x, per);
        double b = MPI_Wtime();
        double mine = rank + 1, all = 0.0;
        MPI_Allreduce(&mine, &all, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        sum += all;
        compute += b - a;
        wait += MPI_Wtime() - b;
    }
    double wall = MPI_Wtime() - t0;
    char node[64] = "?";
    const char *n = getenv("SLURMD_NODENAME");
    if (n)
        snprintf(node, sizeof node, "%s", n);
    else
        gethostname(node, sizeof node - 1);
    double mine[2] = {compute, wait}, *all = rank == 0 ? malloc(2 * sizeof(double) * size) : NULL;
    char *names = rank == 0 ? malloc(sizeof node * size) : NULL;
    MPI_Gather(mine, 2, MPI_DOUBLE, all, 2, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    MPI_Gather(node, sizeof node, MPI_CHAR, names, sizeof node, MPI_CHAR, 0, MPI_COMM_WORLD);
    double xs[2] = {x, -x}, xr[2];
    MPI_Allreduce(xs, xr, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("bsp: %d ranks, %ld steps of %ld: wall %.3f s\n", size, steps, per, wall);
        for (int r = 0; r < size; r++)
            printf("bsp rank %d %s: compute %.3f s, wait %.3f s\n", r, names + r * sizeof node,
                   all[2 * r], all[2 * r + 1]);
        /* the same x on every rank: max(x) == -max(-x) */
        printf("bsp check: %.0f %.17g %s\n", sum, x, xr[0] == -xr[1] ? "same" : "differs");
        free(all);
        free(names);
    }
    MPI_Finalize();
    return 0;
}
