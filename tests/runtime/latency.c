/* libgreenup_mpi's cost (bench.sh). With two ranks, OSU-style latency loops: they
 * ping-pong a small message with MPI_Send and MPI_Recv ("BYTES"), then with MPI_Irecv,
 * MPI_Isend and MPI_Waitall ("nbBYTES"); each prints its name and the mean one-way time in
 * microseconds; then MPI_Win_fence on a window of MPI_Win_allocate ("fence", the mean time
 * per fence, ITERATIONS / 10 of them), and MPI_Allreduce of BYTES ("allreduce", the mean
 * time per call: a collective, whose wrapper also asks the communicator's size and the
 * rank's place in it). With one rank, the interception alone, on MPI_PROC_NULL, where calls
 * return at once: MPI_Send and MPI_Recv ("self"), and MPI_Isend and MPI_Irecv each with
 * its MPI_Wait ("selfnb"); each prints the mean time per call (a post and its wait
 * count as two). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double self_loop(char *buf, int bytes, int iters, int nb)
{
    double t0 = 0;
    MPI_Request r;
    for (int i = 0; i < iters + iters / 10; i++) {
        if (i == iters / 10)
            t0 = MPI_Wtime();
        if (nb) {
            MPI_Isend(buf, bytes, MPI_CHAR, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &r);
            MPI_Wait(&r, MPI_STATUS_IGNORE);
            MPI_Irecv(buf, bytes, MPI_CHAR, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &r);
            MPI_Wait(&r, MPI_STATUS_IGNORE);
        } else {
            MPI_Send(buf, bytes, MPI_CHAR, MPI_PROC_NULL, 1, MPI_COMM_WORLD);
            MPI_Recv(buf, bytes, MPI_CHAR, MPI_PROC_NULL, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
    }
    return (MPI_Wtime() - t0) * 1e6 / ((nb ? 4.0 : 2.0) * iters);
}

static double ping_pong(int rank, char *buf, int bytes, int iters, int nb)
{
    double t0 = 0;
    int peer = 1 - rank;
    MPI_Request r[2];
    for (int i = 0; i < iters + iters / 10; i++) {
        if (i == iters / 10) {
            MPI_Barrier(MPI_COMM_WORLD);
            t0 = MPI_Wtime();
        }
        if (nb) {
            /* Each rank posts its receive first; rank 0 sends, rank 1 answers. */
            MPI_Irecv(buf, bytes, MPI_CHAR, peer, 1, MPI_COMM_WORLD, &r[0]);
            if (rank == 1)
                MPI_Wait(&r[0], MPI_STATUS_IGNORE);
            MPI_Isend(buf, bytes, MPI_CHAR, peer, 1, MPI_COMM_WORLD, &r[1]);
            if (rank == 1)
                MPI_Wait(&r[1], MPI_STATUS_IGNORE);
            else
                MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
        } else if (rank == 0) {
            MPI_Send(buf, bytes, MPI_CHAR, 1, 1, MPI_COMM_WORLD);
            MPI_Recv(buf, bytes, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(buf, bytes, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, bytes, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
        }
    }
    return (MPI_Wtime() - t0) * 1e6 / (2.0 * iters);
}

static double fences(int iters)
{
    long *base;
    MPI_Win win;
    double t0 = 0, t;
    MPI_Win_allocate(sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    for (int i = 0; i < iters + iters / 10; i++) {
        if (i == iters / 10)
            t0 = MPI_Wtime();
        MPI_Win_fence(0, win);
    }
    t = (MPI_Wtime() - t0) * 1e6 / iters;
    MPI_Win_free(&win);
    return t;
}

static double allreduces(char *buf, int bytes, int iters)
{
    double t0 = 0;
    for (int i = 0; i < iters + iters / 10; i++) {
        if (i == iters / 10)
            t0 = MPI_Wtime();
        MPI_Allreduce(MPI_IN_PLACE, buf, bytes, MPI_BYTE, MPI_BOR, MPI_COMM_WORLD);
    }
    return (MPI_Wtime() - t0) * 1e6 / iters;
}

int main(int argc, char **argv)
{
    int rank, size, bytes = argc > 1 ? atoi(argv[1]) : 8, iters = argc > 2 ? atoi(argv[2]) : 100000;
    char *buf;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    buf = calloc(bytes > 0 ? bytes : 1, 1);
    if (size == 1) {
        printf("self %.4f\n", self_loop(buf, bytes, iters, 0));
        printf("selfnb %.4f\n", self_loop(buf, bytes, iters, 1));
    } else if (rank < 2) {
        double blocking = ping_pong(rank, buf, bytes, iters, 0);
        double nonblocking = ping_pong(rank, buf, bytes, iters, 1);
        double fence = fences(iters / 10);
        double allreduce = allreduces(buf, bytes, iters);
        if (rank == 0)
            printf("%d %.3f\nnb%d %.3f\nfence %.3f\nallreduce %.3f\n", bytes, blocking, bytes,
                   nonblocking, fence, allreduce);
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
