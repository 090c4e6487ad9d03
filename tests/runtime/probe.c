/* A two-rank MPI program for libgreenup_mpi's mechanism tests (run.sh).
 *   wait  rank 0 blocks in a small MPI_Recv while rank 1 sleeps, records the controls, sends
 *   large rank 0 blocks in a 1 MiB MPI_Send while rank 1 sleeps, records the controls, receives
 *   short 200 ping-pongs of 8 bytes, an Allreduce and a Barrier
 *   rma   a fence epoch with a 1 MiB MPI_Put to the next rank, recorded during the next fence
 *   exit  a Barrier, then exit without MPI_Finalize
 * After each mode, rank 0 records the controls again. A record lists every cpufreq control
 * under $GREENUP_SYSFS_ROOT as "policyN file value". Rank 0 prints a checksum of what it
 * received, which must not depend on the preload. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void record(const char *out)
{
    const char *root = getenv("GREENUP_SYSFS_ROOT");
    const char *files[] = {"scaling_setspeed", "scaling_max_freq"};
    FILE *o = fopen(out, "w");
    if (!root || !o) {
        fprintf(stderr, "probe: cannot record to %s\n", out);
        MPI_Abort(MPI_COMM_WORLD, 2);
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

static char *path(const char *dir, const char *name)
{
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/%s", dir, name);
    return buf;
}

int main(int argc, char **argv)
{
    int rank, size;
    unsigned long sum = 0;
    const char *mode = argc > 1 ? argv[1] : "short";
    const char *out = argc > 2 ? argv[2] : ".";
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2)
        MPI_Abort(MPI_COMM_WORLD, 1);
    if (!strcmp(mode, "wait")) {
        char msg[8] = "greenup";
        if (rank == 0) {
            MPI_Recv(msg, 8, MPI_CHAR, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            for (int i = 0; i < 8; i++)
                sum += (unsigned char)msg[i];
        } else {
            usleep(400000);
            record(path(out, "during"));
            MPI_Send(msg, 8, MPI_CHAR, 0, 0, MPI_COMM_WORLD);
        }
    } else if (!strcmp(mode, "large")) {
        int n = 1 << 18; /* 1 MiB of int */
        int *buf = malloc(sizeof(int) * n);
        for (int i = 0; i < n; i++)
            buf[i] = i * (rank + 1);
        if (rank == 0) {
            MPI_Send(buf, n, MPI_INT, 1, 0, MPI_COMM_WORLD);
        } else {
            usleep(400000);
            record(path(out, "during"));
            MPI_Recv(buf, n, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            for (int i = 0; i < n; i++)
                sum += (unsigned)buf[i];
            MPI_Send(&sum, 1, MPI_UNSIGNED_LONG, 0, 1, MPI_COMM_WORLD);
        }
        if (rank == 0)
            MPI_Recv(&sum, 1, MPI_UNSIGNED_LONG, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        free(buf);
    } else if (!strcmp(mode, "short") || !strcmp(mode, "exit")) {
        long v = rank + 1, total = 0;
        for (int i = 0; !strcmp(mode, "short") && i < 200; i++) {
            if (rank == 0) {
                MPI_Send(&v, 1, MPI_LONG, 1, i, MPI_COMM_WORLD);
                MPI_Recv(&v, 1, MPI_LONG, 1, i, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                sum += (unsigned long)v;
                v += 1;
            } else {
                MPI_Recv(&v, 1, MPI_LONG, 0, i, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                v *= 2;
                MPI_Send(&v, 1, MPI_LONG, 0, i, MPI_COMM_WORLD);
            }
        }
        MPI_Allreduce(&v, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
        sum += (unsigned long)total;
        MPI_Barrier(MPI_COMM_WORLD);
        if (!strcmp(mode, "exit"))
            exit(0);
    } else if (!strcmp(mode, "rma")) {
        int n = 1 << 18;
        int *win_buf, *src = malloc(sizeof(int) * n);
        MPI_Win win;
        for (int i = 0; i < n; i++)
            src[i] = i + rank;
        MPI_Win_allocate(sizeof(int) * n, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win_buf,
                         &win);
        MPI_Win_fence(0, win);
        MPI_Put(src, n, MPI_INT, 1 - rank, 0, n, MPI_INT, win);
        if (rank == 1) {
            usleep(400000);
            record(path(out, "during"));
        }
        MPI_Win_fence(0, win);
        for (int i = 0; i < n; i++)
            sum += (unsigned)win_buf[i];
        MPI_Win_free(&win);
        free(src);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        if (getenv("GREENUP_SYSFS_ROOT"))
            record(path(out, "after"));
        printf("checksum %lu\n", sum);
    }
    MPI_Finalize();
    return 0;
}
