/* A two-rank MPI program for libgreenup_mpi's mechanism tests (run.sh).
 *   wait  rank 0 blocks in a small MPI_Recv while rank 1 sleeps, records the controls, sends
 *   large rank 0 blocks in a 1 MiB MPI_Send while rank 1 sleeps, records the controls, receives
 *   short 200 ping-pongs of 8 bytes, an Allreduce and a Barrier
 *   rma   a fence epoch with a 1 MiB MPI_Put to the next rank, recorded during the next fence
 *   exit  a Barrier, then exit without MPI_Finalize
 *   hang  each rank writes its pid to pid-RANK and waits for a message that never comes
 *   all   every intercepted C call at least once, with results folded into the checksum;
 *         each rank writes how many intercepted calls it made to calls-RANK
 *   threads  under MPI_THREAD_MULTIPLE, two threads per rank at once, each on its own tag
 *         and its own window: 64 KiB nonblocking exchanges, then fence epochs with a Put;
 *         counted and written to calls-RANK like "all"
 *   manywin  1,100 windows alive at once (more than greenup gives barriers to), fence
 *         epochs with a Put on some of them, the last one included
 *   wincreate  the same for windows made by MPI_Win_create and MPI_Win_create_dynamic
 *   nblarge / nbsmall  rank 0 waits in MPI_Wait for a 1 MiB (8 B) MPI_Irecv while rank 1
 *         sleeps, records the controls, then sends with MPI_Isend and MPI_Wait
 *   fencewait / winwait  rank 0 waits in an MPI_Win_fence (an MPI_Win_wait) for rank 1,
 *         which sleeps a second first; rank 0 writes the CPU seconds and wall seconds
 *         its process spent in that call to cpu-0
 * After each mode, rank 0 records the controls again. A record lists every cpufreq control
 * under $GREENUP_SYSFS_ROOT as "policyN file value". Rank 0 prints a checksum of what it
 * received, which must not depend on the preload. */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
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

/* Intercepted calls this rank made in mode "all", counted by the program itself. */
static long made;
#define M(call) (made++, (call))

/* Every intercepted C call; returns what this rank received, folded. */
static unsigned long every_call(int rank)
{
    int peer = 1 - rank, n = 64, x[64], y[128], r[2], idx, outcount, indices[2];
    int counts[2], displs[2];
    unsigned long sum = 0;
    long *acc, one = rank + 1, old[1];
    MPI_Request req[2];
    MPI_Status st;
    MPI_Win win;
    for (int i = 0; i < n; i++)
        x[i] = i * 3 + rank;
    M(MPI_Sendrecv(x, n, MPI_INT, peer, 1, y, n, MPI_INT, peer, 1, MPI_COMM_WORLD, &st));
    for (int i = 0; i < n; i++)
        sum += (unsigned)y[i] * (i + 1);
    M(MPI_Irecv(&r[0], 1, MPI_INT, peer, 2, MPI_COMM_WORLD, &req[0]));
    M(MPI_Isend(&x[5], 1, MPI_INT, peer, 2, MPI_COMM_WORLD, &req[1]));
    M(MPI_Wait(&req[0], &st));
    M(MPI_Wait(&req[1], MPI_STATUS_IGNORE));
    sum += r[0];
    M(MPI_Irecv(&r[0], 1, MPI_INT, peer, 3, MPI_COMM_WORLD, &req[0]));
    M(MPI_Isend(&x[6], 1, MPI_INT, peer, 3, MPI_COMM_WORLD, &req[1]));
    M(MPI_Waitall(2, req, MPI_STATUSES_IGNORE));
    sum += r[0] * 7;
    M(MPI_Irecv(&r[0], 1, MPI_INT, peer, 4, MPI_COMM_WORLD, &req[0]));
    M(MPI_Isend(&x[7], 1, MPI_INT, peer, 4, MPI_COMM_WORLD, &req[1]));
    for (int left = 2; left > 0; left--)
        M(MPI_Waitany(2, req, &idx, &st));
    sum += r[0] * 11;
    M(MPI_Irecv(&r[1], 1, MPI_INT, peer, 5, MPI_COMM_WORLD, &req[0]));
    M(MPI_Isend(&x[8], 1, MPI_INT, peer, 5, MPI_COMM_WORLD, &req[1]));
    for (int left = 2; left > 0; left -= outcount)
        M(MPI_Waitsome(2, req, &outcount, indices, MPI_STATUSES_IGNORE));
    sum += r[1] * 13;
    if (rank == 0) {
        M(MPI_Send(x, 3, MPI_INT, 1, 6, MPI_COMM_WORLD));
    } else {
        int count;
        M(MPI_Probe(0, 6, MPI_COMM_WORLD, &st));
        MPI_Get_count(&st, MPI_INT, &count);
        M(MPI_Recv(y, count, MPI_INT, 0, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        sum += count * 17 + y[2];
    }
    y[0] = rank ? 0 : 99;
    M(MPI_Bcast(y, 1, MPI_INT, 0, MPI_COMM_WORLD));
    sum += y[0];
    M(MPI_Reduce(x, y, n, MPI_INT, MPI_SUM, 1, MPI_COMM_WORLD));
    if (rank == 1)
        sum += y[n - 1];
    M(MPI_Allreduce(MPI_IN_PLACE, x, n, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    sum += x[n - 1];
    M(MPI_Alltoall(x, 2, MPI_INT, y, 2, MPI_INT, MPI_COMM_WORLD));
    sum += y[3];
    counts[0] = 1, counts[1] = 2, displs[0] = 0, displs[1] = 1;
    {
        int rc[2] = {rank == 0 ? 1 : 2, rank == 0 ? 1 : 2}, rd[2] = {0, rc[0]};
        M(MPI_Alltoallv(x, counts, displs, MPI_INT, y, rc, rd, MPI_INT, MPI_COMM_WORLD));
        sum += y[0] + y[rc[0]];
    }
    M(MPI_Allgather(&x[rank], 1, MPI_INT, y, 1, MPI_INT, MPI_COMM_WORLD));
    sum += y[0] * 3 + y[1];
    M(MPI_Allgatherv(x, counts[rank], MPI_INT, y, counts, displs, MPI_INT, MPI_COMM_WORLD));
    sum += y[0] + y[1] * 5 + y[2];
    if (rank == 0) {
        y[0] = 42;
        M(MPI_Gather(MPI_IN_PLACE, 1, MPI_INT, y, 1, MPI_INT, 0, MPI_COMM_WORLD));
        sum += y[0] + y[1];
        M(MPI_Scatter(x, 2, MPI_INT, MPI_IN_PLACE, 2, MPI_INT, 0, MPI_COMM_WORLD));
    } else {
        /* The root-only arguments are garbage here, as the standard allows. */
        M(MPI_Gather(&x[4], 1, MPI_INT, NULL, -7, MPI_DATATYPE_NULL, 0, MPI_COMM_WORLD));
        M(MPI_Scatter(NULL, -7, MPI_DATATYPE_NULL, y, 2, MPI_INT, 0, MPI_COMM_WORLD));
        sum += y[0] + y[1];
    }
    M(MPI_Barrier(MPI_COMM_WORLD));
    MPI_Win_allocate(4 * sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &acc, &win);
    M(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win));
    for (int i = 0; i < 4; i++)
        acc[i] = 0;
    M(MPI_Win_unlock(rank, win));
    M(MPI_Barrier(MPI_COMM_WORLD));
    M(MPI_Win_fence(0, win));
    M(MPI_Put(&one, 1, MPI_LONG, peer, 0, 1, MPI_LONG, win));
    M(MPI_Accumulate(&one, 1, MPI_LONG, peer, 1, 1, MPI_LONG, MPI_SUM, win));
    M(MPI_Win_fence(0, win));
    M(MPI_Win_lock(MPI_LOCK_SHARED, peer, 0, win));
    M(MPI_Get(&old[0], 1, MPI_LONG, peer, 0, 1, MPI_LONG, win));
    M(MPI_Win_flush(peer, win));
    sum += old[0] * 19;
    M(MPI_Get_accumulate(&one, 1, MPI_LONG, &old[0], 1, MPI_LONG, peer, 2, 1, MPI_LONG, MPI_SUM,
                         win));
    M(MPI_Win_flush_local(peer, win));
    M(MPI_Win_unlock(peer, win));
    M(MPI_Barrier(MPI_COMM_WORLD));
    M(MPI_Win_lock_all(0, win));
    M(MPI_Accumulate(&one, 1, MPI_LONG, peer, 3, 1, MPI_LONG, MPI_SUM, win));
    M(MPI_Win_flush_all(win));
    M(MPI_Win_flush_local_all(win));
    M(MPI_Win_unlock_all(win));
    M(MPI_Barrier(MPI_COMM_WORLD));
    {
        MPI_Group world, other;
        int p = peer;
        MPI_Comm_group(MPI_COMM_WORLD, &world);
        MPI_Group_incl(world, 1, &p, &other);
        MPI_Win_post(other, 0, win);
        MPI_Win_start(other, 0, win);
        M(MPI_Put(&one, 1, MPI_LONG, peer, 0, 1, MPI_LONG, win));
        M(MPI_Win_complete(win));
        M(MPI_Win_wait(win));
        MPI_Group_free(&other);
        MPI_Group_free(&world);
    }
    M(MPI_Barrier(MPI_COMM_WORLD));
    {
        /* Request-based one-sided calls, in a passive-target epoch. */
        long got = 0, fetched = 0;
        M(MPI_Win_lock(MPI_LOCK_SHARED, peer, 0, win));
        M(MPI_Rput(&one, 1, MPI_LONG, peer, 0, 1, MPI_LONG, win, &req[0]));
        M(MPI_Wait(&req[0], MPI_STATUS_IGNORE));
        M(MPI_Rget(&got, 1, MPI_LONG, peer, 1, 1, MPI_LONG, win, &req[0]));
        M(MPI_Wait(&req[0], MPI_STATUS_IGNORE));
        M(MPI_Raccumulate(&one, 1, MPI_LONG, peer, 3, 1, MPI_LONG, MPI_SUM, win, &req[0]));
        M(MPI_Rget_accumulate(&one, 1, MPI_LONG, &fetched, 1, MPI_LONG, peer, 2, 1, MPI_LONG,
                              MPI_SUM, win, &req[1]));
        M(MPI_Waitall(2, req, MPI_STATUSES_IGNORE));
        M(MPI_Win_unlock(peer, win));
        sum += got * 61 + fetched * 67;
    }
    M(MPI_Barrier(MPI_COMM_WORLD));
    sum += acc[0] * 23 + acc[1] * 29 + acc[2] * 31 + acc[3] * 37;
    MPI_Win_free(&win);
    {
        /* Nonblocking point-to-point: every posting call, completed by every test. */
        int a[4], b[4] = {0, 0, 0, 0}, flag = 0, at, outcount2, ind[3], size;
        MPI_Request rq[4], sq[4];
        static char attached[4096];
        void *detached;
        for (int i = 0; i < 4; i++)
            a[i] = rank * 10 + i + 1;
        for (int i = 0; i < 4; i++)
            M(MPI_Irecv(&b[i], 1, MPI_INT, peer, 20 + i, MPI_COMM_WORLD, &rq[i]));
        M(MPI_Barrier(MPI_COMM_WORLD)); /* every receive is posted: MPI_Irsend may go */
        MPI_Buffer_attach(attached, sizeof attached);
        M(MPI_Isend(&a[0], 1, MPI_INT, peer, 20, MPI_COMM_WORLD, &sq[0]));
        M(MPI_Issend(&a[1], 1, MPI_INT, peer, 21, MPI_COMM_WORLD, &sq[1]));
        M(MPI_Irsend(&a[2], 1, MPI_INT, peer, 22, MPI_COMM_WORLD, &sq[2]));
        M(MPI_Ibsend(&a[3], 1, MPI_INT, peer, 23, MPI_COMM_WORLD, &sq[3]));
        do
            M(MPI_Test(&rq[0], &flag, MPI_STATUS_IGNORE));
        while (!flag);
        do
            M(MPI_Testany(3, &rq[1], &at, &flag, MPI_STATUS_IGNORE));
        while (!flag);
        do
            M(MPI_Testsome(3, &rq[1], &outcount2, ind, MPI_STATUSES_IGNORE));
        while (outcount2 == 0);
        do
            M(MPI_Testall(3, &rq[1], &flag, MPI_STATUSES_IGNORE));
        while (!flag);
        M(MPI_Waitall(4, sq, MPI_STATUSES_IGNORE));
        MPI_Buffer_detach(&detached, &size);
        sum += b[0] * 41 + b[1] * 43 + b[2] * 47 + b[3] * 53;
        /* A request freed before its transfer completes: the receive still gets it. */
        M(MPI_Isend(&a[1], 1, MPI_INT, peer, 24, MPI_COMM_WORLD, &sq[0]));
        MPI_Request_free(&sq[0]);
        M(MPI_Recv(&b[0], 1, MPI_INT, peer, 24, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        sum += b[0] * 59;
    }
    {
        /* Fences on a shared-memory window (block mode owns them). */
        long *shared, *theirs;
        MPI_Aint shared_size;
        int unit;
        MPI_Win w;
        MPI_Win_allocate_shared(sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD,
                                &shared, &w);
        M(MPI_Win_fence(0, w));
        *shared = rank + 100;
        M(MPI_Win_fence(0, w));
        MPI_Win_shared_query(w, peer, &shared_size, &unit, &theirs);
        sum += *theirs * 73;
        M(MPI_Win_fence(0, w));
        MPI_Win_free(&w);
    }
    return sum;
}

/* Windows on memory the program brings: MPI_Win_create and MPI_Win_create_dynamic (which
 * need an MPI with one-sided transfers between processes, such as shared memory with
 * single-copy). */
static unsigned long window_calls(int rank)
{
    int peer = 1 - rank;
    long mine[2] = {rank + 5, 0}, got = 0;
    MPI_Win w;
    MPI_Win_create(mine, sizeof mine, sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &w);
    M(MPI_Win_fence(MPI_MODE_NOPRECEDE, w));
    M(MPI_Get(&got, 1, MPI_LONG, peer, 0, 1, MPI_LONG, w));
    M(MPI_Win_fence(MPI_MODE_NOSUCCEED, w));
    MPI_Win_free(&w);
    MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &w);
    MPI_Win_attach(w, mine, sizeof mine);
    M(MPI_Win_fence(0, w));
    M(MPI_Win_fence(0, w));
    MPI_Win_detach(w, mine);
    MPI_Win_free(&w);
    return (unsigned long)got * 71;
}

/* One thread of mode "threads": `arg` points to its index and its window. */
struct worker {
    int rank, index;
    MPI_Win win;
    long *base;
    unsigned long sum;
};

static void *work(void *arg)
{
    struct worker *w = arg;
    int peer = 1 - w->rank, n = 16384; /* 64 KiB of int: at the threshold */
    int *out = malloc(sizeof(int) * n), *in = malloc(sizeof(int) * n);
    MPI_Request r[2];
    for (int i = 0; i < 20; i++) {
        for (int k = 0; k < n; k++)
            out[k] = k * (w->index + 1) + i + w->rank;
        __atomic_add_fetch(&made, 3, __ATOMIC_RELAXED);
        MPI_Irecv(in, n, MPI_INT, peer, 100 + w->index, MPI_COMM_WORLD, &r[0]);
        MPI_Isend(out, n, MPI_INT, peer, 100 + w->index, MPI_COMM_WORLD, &r[1]);
        MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
        for (int k = 0; k < n; k += 97)
            w->sum += (unsigned)in[k] * (k % 7 + 1);
    }
    for (int i = 0; i < 20; i++) {
        long v = 1000L * w->index + i + w->rank;
        __atomic_add_fetch(&made, 3, __ATOMIC_RELAXED);
        MPI_Win_fence(0, w->win);
        MPI_Put(&v, 1, MPI_LONG, peer, 0, 1, MPI_LONG, w->win);
        MPI_Win_fence(0, w->win);
        w->sum += (unsigned long)*w->base * (i + 3);
    }
    free(out);
    free(in);
    return NULL;
}

/* CPU and wall seconds of this process so far. */
static void times(double *cpu, double *wall)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    *cpu = u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
    *wall = MPI_Wtime();
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
    if (!strcmp(mode, "threads")) {
        int provided;
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
        if (provided != MPI_THREAD_MULTIPLE) {
            fprintf(stderr, "probe: no MPI_THREAD_MULTIPLE\n");
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
    } else {
        MPI_Init(&argc, &argv);
    }
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
    } else if (!strcmp(mode, "hang")) {
        char msg[8];
        FILE *f = fopen(path(out, rank ? "pid-1" : "pid-0"), "w");
        fprintf(f, "%d\n", (int)getpid());
        fclose(f);
        MPI_Recv(msg, 8, MPI_CHAR, 1 - rank, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else if (!strcmp(mode, "all") || !strcmp(mode, "wincreate")) {
        unsigned long mine = strcmp(mode, "all") ? window_calls(rank) : every_call(rank), theirs = 0;
        FILE *f;
        M(MPI_Sendrecv(&mine, 1, MPI_UNSIGNED_LONG, 1 - rank, 8, &theirs, 1, MPI_UNSIGNED_LONG,
                       1 - rank, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        sum = mine * 1000003UL + theirs;
        f = fopen(path(out, rank ? "calls-1" : "calls-0"), "w");
        fprintf(f, "%ld\n", made + 1); /* and the Barrier below */
        fclose(f);
    } else if (!strcmp(mode, "threads")) {
        struct worker w[2];
        pthread_t t[2];
        FILE *f;
        /* Windows are made in order on one thread: collective calls on one communicator
         * must be, which MPI leaves to the program. */
        for (int i = 0; i < 2; i++) {
            w[i].rank = rank, w[i].index = i, w[i].sum = 0;
            MPI_Win_allocate(sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD,
                             &w[i].base, &w[i].win);
            *w[i].base = 0;
        }
        for (int i = 0; i < 2; i++)
            pthread_create(&t[i], NULL, work, &w[i]);
        for (int i = 0; i < 2; i++) {
            pthread_join(t[i], NULL);
            sum = sum * 31 + w[i].sum;
            MPI_Win_free(&w[i].win);
        }
        f = fopen(path(out, rank ? "calls-1" : "calls-0"), "w");
        fprintf(f, "%ld\n", made + 1); /* and the Barrier below */
        fclose(f);
    } else if (!strcmp(mode, "manywin")) {
        int n = 1100;
        MPI_Win *w = malloc(sizeof(MPI_Win) * n);
        long **base = malloc(sizeof(long *) * n);
        for (int i = 0; i < n; i++) {
            MPI_Win_allocate(sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &base[i],
                             &w[i]);
            *base[i] = 0;
        }
        for (int k = 0; k <= 7; k++) {
            int i = k < 7 ? k * (n / 7) : n - 1; /* the first, some between, the last */
            long v = 3L * i + rank;
            MPI_Win_fence(0, w[i]);
            MPI_Put(&v, 1, MPI_LONG, 1 - rank, 0, 1, MPI_LONG, w[i]);
            MPI_Win_fence(0, w[i]);
            sum = sum * 7 + (unsigned long)*base[i];
        }
        for (int i = 0; i < n; i++)
            MPI_Win_free(&w[i]);
        free(w);
        free(base);
    } else if (!strcmp(mode, "nblarge") || !strcmp(mode, "nbsmall")) {
        int n = strcmp(mode, "nblarge") ? 2 : 1 << 18; /* 8 B or 1 MiB of int */
        int *buf = malloc(sizeof(int) * n);
        MPI_Request req;
        for (int i = 0; i < n; i++)
            buf[i] = i * 7 + 1;
        if (rank == 0) {
            MPI_Irecv(buf, n, MPI_INT, 1, 0, MPI_COMM_WORLD, &req);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
            for (int i = 0; i < n; i++)
                sum += (unsigned)buf[i] * (i % 5 + 1);
        } else {
            usleep(400000);
            record(path(out, "during"));
            MPI_Isend(buf, n, MPI_INT, 0, 0, MPI_COMM_WORLD, &req);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
        }
        free(buf);
    } else if (!strcmp(mode, "fencewait") || !strcmp(mode, "winwait")) {
        long *base;
        double cpu0, wall0, cpu1, wall1;
        MPI_Win win;
        MPI_Group world, other;
        int p = 1 - rank;
        MPI_Comm_group(MPI_COMM_WORLD, &world);
        MPI_Group_incl(world, 1, &p, &other);
        MPI_Win_allocate(sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
        *base = 0;
        MPI_Win_fence(0, win);
        if (rank == 1)
            usleep(1000000);
        times(&cpu0, &wall0);
        if (!strcmp(mode, "fencewait")) {
            MPI_Win_fence(0, win);
        } else if (rank == 0) {
            MPI_Win_post(other, 0, win);
            MPI_Win_wait(win);
        } else {
            long v = 17;
            MPI_Win_start(other, 0, win);
            MPI_Put(&v, 1, MPI_LONG, 0, 0, 1, MPI_LONG, win);
            MPI_Win_complete(win);
        }
        times(&cpu1, &wall1);
        if (!strcmp(mode, "fencewait"))
            MPI_Win_fence(0, win);
        sum = *base;
        if (rank == 0) {
            FILE *f = fopen(path(out, "cpu-0"), "w");
            fprintf(f, "%.6f %.6f\n", cpu1 - cpu0, wall1 - wall0);
            fclose(f);
        }
        MPI_Win_free(&win);
        MPI_Group_free(&other);
        MPI_Group_free(&world);
    } else if (!strcmp(mode, "self")) {
        /* A rank alone (MPI_COMM_SELF) copies within its own memory: none of these is
         * communication. The all-to-all over both ranks moves the other rank's block
         * only: 2 ints, 8 bytes. */
        int a[4] = {rank, rank + 1, rank + 2, rank + 3}, b[4] = {0, 0, 0, 0};
        MPI_Allreduce(a, b, 4, MPI_INT, MPI_SUM, MPI_COMM_SELF);
        MPI_Bcast(a, 4, MPI_INT, 0, MPI_COMM_SELF);
        MPI_Alltoall(a, 4, MPI_INT, b, 4, MPI_INT, MPI_COMM_SELF);
        MPI_Barrier(MPI_COMM_SELF);
        sum += (unsigned long)(b[0] + b[3]);
        MPI_Alltoall(a, 2, MPI_INT, b, 2, MPI_INT, MPI_COMM_WORLD);
        sum += (unsigned long)(b[0] * 7 + b[2]);
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
