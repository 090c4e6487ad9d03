/* TEST-ONLY part of the stand-in hardware (tests/cluster/README.md): every MPI call that
 * waits sleeps between tests instead of polling, for every run on the bench.
 *
 * Why: the stand-in slows a node by a CFS CPU quota. A rank that polls in an MPI wait
 * spends its quota doing nothing and is then stopped until the next period, however soon
 * its message arrives; a real core at a lower clock would have answered at once. With
 * this library preloaded (tests/cluster/apps/run-app.sh does, baselines included), a
 * waiting rank tests its request, then sleeps, starting at 4 us and doubling up to
 * GC_SLEEPWAIT_MAX_US (default 64), so it uses almost none of its quota while it waits.
 *
 * How: each blocking call becomes its nonblocking form and a loop of the matching test,
 * which the MPI standard defines as equivalent (MPI_Send is MPI_Isend plus MPI_Wait,
 * MPI_Allreduce is MPI_Iallreduce plus MPI_Wait, ...). Every rank of every job on the
 * bench has it, so a blocking collective never meets a nonblocking one. Both the MPI_
 * and the PMPI_ names are defined: a program's calls reach the MPI_ name, while greenup's
 * own runtime (libgreenup_mpi.so, preloaded before this library) and Open MPI's Fortran
 * bindings call the PMPI_ name. This library never calls a name it defines.
 *
 * Not converted (they stay in the MPI's own polling loop): one-sided synchronization
 * (MPI_Win_fence, flush, lock, unlock, complete, wait), MPI_Sendrecv_replace, matched
 * probes, and the collectives of communicator and window creation. */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <time.h>

#define BOTH(ret, name, args) \
    ret P##name args __attribute__((visibility("default"))); \
    ret name args __attribute__((alias("P" #name), visibility("default"))); \
    ret P##name args

static long max_sleep_ns(void)
{
    static long ns;
    if (!ns) {
        const char *v = getenv("GC_SLEEPWAIT_MAX_US");
        long us = v ? atol(v) : 64;
        ns = (us > 0 ? us : 64) * 1000;
    }
    return ns;
}

/* One pause of the back-off: the first tests poll (a message already on its way costs
 * no sleep), then sleeps from 4 us doubling up to the longest. */
static void pause_once(int *round)
{
    static __thread int slack;
    if (*round < 16) {
        (*round)++;
        return;
    }
    if (!slack) {
        /* The default 50 us timer slack would stretch every short sleep. */
        prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
        slack = 1;
    }
    long ns = 4000L << (*round - 16 < 8 ? *round - 16 : 8);
    if (ns > max_sleep_ns())
        ns = max_sleep_ns();
    else
        (*round)++;
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL);
}

BOTH(int, MPI_Wait, (MPI_Request *req, MPI_Status *st))
{
    int done = 0, round = 0, rc;
    while ((rc = PMPI_Test(req, &done, st)) == MPI_SUCCESS && !done)
        pause_once(&round);
    return rc;
}

BOTH(int, MPI_Waitall, (int n, MPI_Request reqs[], MPI_Status sts[]))
{
    int done = 0, round = 0, rc;
    while ((rc = PMPI_Testall(n, reqs, &done, sts)) == MPI_SUCCESS && !done)
        pause_once(&round);
    return rc;
}

BOTH(int, MPI_Waitany, (int n, MPI_Request reqs[], int *index, MPI_Status *st))
{
    int done = 0, round = 0, rc;
    while ((rc = PMPI_Testany(n, reqs, index, &done, st)) == MPI_SUCCESS && !done)
        pause_once(&round);
    return rc;
}

BOTH(int, MPI_Waitsome, (int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status sts[]))
{
    int round = 0, rc;
    /* MPI_Testsome gives 0 while nothing completed, MPI_UNDEFINED when no request is active. */
    while ((rc = PMPI_Testsome(n, reqs, outcount, indices, sts)) == MPI_SUCCESS && *outcount == 0)
        pause_once(&round);
    return rc;
}

/* Wait for one request of ours (never a name this library defines). */
static int finish(int rc, MPI_Request *req, MPI_Status *st)
{
    int done = 0, round = 0;
    if (rc != MPI_SUCCESS)
        return rc;
    while ((rc = PMPI_Test(req, &done, st)) == MPI_SUCCESS && !done)
        pause_once(&round);
    return rc;
}

BOTH(int, MPI_Send, (const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm))
{
    MPI_Request r;
    return finish(PMPI_Isend(buf, count, type, dest, tag, comm, &r), &r, MPI_STATUS_IGNORE);
}

BOTH(int, MPI_Ssend, (const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm))
{
    MPI_Request r;
    return finish(PMPI_Issend(buf, count, type, dest, tag, comm, &r), &r, MPI_STATUS_IGNORE);
}

BOTH(int, MPI_Recv, (void *buf, int count, MPI_Datatype type, int src, int tag, MPI_Comm comm, MPI_Status *st))
{
    MPI_Request r;
    return finish(PMPI_Irecv(buf, count, type, src, tag, comm, &r), &r, st);
}

BOTH(int, MPI_Sendrecv, (const void *sbuf, int scount, MPI_Datatype stype, int dest, int stag,
                         void *rbuf, int rcount, MPI_Datatype rtype, int src, int rtag,
                         MPI_Comm comm, MPI_Status *st))
{
    MPI_Request r[2];
    MPI_Status s[2];
    int done = 0, round = 0, rc;
    if ((rc = PMPI_Irecv(rbuf, rcount, rtype, src, rtag, comm, &r[0])) != MPI_SUCCESS)
        return rc;
    if ((rc = PMPI_Isend(sbuf, scount, stype, dest, stag, comm, &r[1])) != MPI_SUCCESS) {
        PMPI_Cancel(&r[0]);
        PMPI_Request_free(&r[0]);
        return rc;
    }
    while ((rc = PMPI_Testall(2, r, &done, s)) == MPI_SUCCESS && !done)
        pause_once(&round);
    if (rc == MPI_SUCCESS && st != MPI_STATUS_IGNORE)
        *st = s[0];
    return rc;
}

BOTH(int, MPI_Probe, (int src, int tag, MPI_Comm comm, MPI_Status *st))
{
    int found = 0, round = 0, rc;
    while ((rc = PMPI_Iprobe(src, tag, comm, &found, st)) == MPI_SUCCESS && !found)
        pause_once(&round);
    return rc;
}

/* Collectives: the nonblocking form, then a wait that sleeps. */
#define WAITED(call) \
    do { \
        MPI_Request r_; \
        return finish(call, &r_, MPI_STATUS_IGNORE); \
    } while (0)

BOTH(int, MPI_Barrier, (MPI_Comm comm))
{
    WAITED(PMPI_Ibarrier(comm, &r_));
}

BOTH(int, MPI_Bcast, (void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm))
{
    WAITED(PMPI_Ibcast(buf, count, type, root, comm, &r_));
}

BOTH(int, MPI_Reduce, (const void *s, void *r, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm))
{
    WAITED(PMPI_Ireduce(s, r, count, type, op, root, comm, &r_));
}

BOTH(int, MPI_Allreduce, (const void *s, void *r, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm))
{
    WAITED(PMPI_Iallreduce(s, r, count, type, op, comm, &r_));
}

BOTH(int, MPI_Reduce_scatter, (const void *s, void *r, const int counts[], MPI_Datatype type, MPI_Op op, MPI_Comm comm))
{
    WAITED(PMPI_Ireduce_scatter(s, r, counts, type, op, comm, &r_));
}

BOTH(int, MPI_Reduce_scatter_block, (const void *s, void *r, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm))
{
    WAITED(PMPI_Ireduce_scatter_block(s, r, count, type, op, comm, &r_));
}

BOTH(int, MPI_Scan, (const void *s, void *r, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm))
{
    WAITED(PMPI_Iscan(s, r, count, type, op, comm, &r_));
}

BOTH(int, MPI_Exscan, (const void *s, void *r, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm))
{
    WAITED(PMPI_Iexscan(s, r, count, type, op, comm, &r_));
}

BOTH(int, MPI_Gather, (const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt, int root, MPI_Comm comm))
{
    WAITED(PMPI_Igather(s, sc, st, r, rc, rt, root, comm, &r_));
}

BOTH(int, MPI_Gatherv, (const void *s, int sc, MPI_Datatype st, void *r, const int rcs[], const int displs[],
                        MPI_Datatype rt, int root, MPI_Comm comm))
{
    WAITED(PMPI_Igatherv(s, sc, st, r, rcs, displs, rt, root, comm, &r_));
}

BOTH(int, MPI_Scatter, (const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt, int root, MPI_Comm comm))
{
    WAITED(PMPI_Iscatter(s, sc, st, r, rc, rt, root, comm, &r_));
}

BOTH(int, MPI_Scatterv, (const void *s, const int scs[], const int displs[], MPI_Datatype st, void *r, int rc,
                         MPI_Datatype rt, int root, MPI_Comm comm))
{
    WAITED(PMPI_Iscatterv(s, scs, displs, st, r, rc, rt, root, comm, &r_));
}

BOTH(int, MPI_Allgather, (const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt, MPI_Comm comm))
{
    WAITED(PMPI_Iallgather(s, sc, st, r, rc, rt, comm, &r_));
}

BOTH(int, MPI_Allgatherv, (const void *s, int sc, MPI_Datatype st, void *r, const int rcs[], const int displs[],
                           MPI_Datatype rt, MPI_Comm comm))
{
    WAITED(PMPI_Iallgatherv(s, sc, st, r, rcs, displs, rt, comm, &r_));
}

BOTH(int, MPI_Alltoall, (const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt, MPI_Comm comm))
{
    WAITED(PMPI_Ialltoall(s, sc, st, r, rc, rt, comm, &r_));
}

BOTH(int, MPI_Alltoallv, (const void *s, const int scs[], const int sd[], MPI_Datatype st, void *r, const int rcs[],
                          const int rd[], MPI_Datatype rt, MPI_Comm comm))
{
    WAITED(PMPI_Ialltoallv(s, scs, sd, st, r, rcs, rd, rt, comm, &r_));
}
