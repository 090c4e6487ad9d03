/* libgreenup_mpi's cost (bench.sh). With two ranks, an OSU-style latency loop: they
 * ping-pong a small message; prints the size and the mean one-way time in microseconds.
 * With one rank, the interception alone: sends to and receives from MPI_PROC_NULL, which
 * return at once; prints "self" and the mean time per call in microseconds. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int rank, size, bytes = argc > 1 ? atoi(argv[1]) : 8, iters = argc > 2 ? atoi(argv[2]) : 100000;
    int warmup = iters / 10;
    char *buf;
    double t0 = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    buf = calloc(bytes > 0 ? bytes : 1, 1);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size == 1) {
        for (int i = 0; i < warmup + iters; i++) {
            if (i == warmup)
                t0 = MPI_Wtime();
            MPI_Send(buf, bytes, MPI_CHAR, MPI_PROC_NULL, 1, MPI_COMM_WORLD);
            MPI_Recv(buf, bytes, MPI_CHAR, MPI_PROC_NULL, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
        printf("self %.4f\n", (MPI_Wtime() - t0) * 1e6 / (2.0 * iters));
        free(buf);
        MPI_Finalize();
        return 0;
    }
    for (int i = 0; i < warmup + iters; i++) {
        if (i == warmup) {
            MPI_Barrier(MPI_COMM_WORLD);
            t0 = MPI_Wtime();
        }
        if (rank == 0) {
            MPI_Send(buf, bytes, MPI_CHAR, 1, 1, MPI_COMM_WORLD);
            MPI_Recv(buf, bytes, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            MPI_Recv(buf, bytes, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, bytes, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
        }
    }
    if (rank == 0)
        printf("%d %.3f\n", bytes, (MPI_Wtime() - t0) * 1e6 / (2.0 * iters));
    free(buf);
    MPI_Finalize();
    return 0;
}
