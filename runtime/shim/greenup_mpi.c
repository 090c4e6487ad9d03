/* greenup's MPI shim: the typed half of libgreenup_mpi.so.
 *
 * Compiled against the MPI library's own mpi.h, so handles, statuses and constants are
 * that library's. Each wrapper works out how many bytes the call moves and whether they
 * are contiguous, asks the Rust side (greenup_enter) whether to lower the core's
 * frequency, calls the PMPI_ entry point, and tells the Rust side when the call is over
 * (greenup_leave). The exported MPI_ names are trampolines in the Rust half that jump
 * here (src/shim.rs says why).
 *
 * Blocking point-to-point calls whose waiting can be split into test + back-off are
 * waited on here (own_wait), so that a call that lasts longer than the timeout can be
 * lowered, and in `block` mode sleep instead of spinning. Collectives and one-sided
 * synchronization cannot be split without changing which calls match, so only the byte
 * threshold applies to them.
 *
 * PMPI_ and pmpi_*_ are weak references: preloaded into a program without MPI, the
 * library loads, resolves nothing and is never called. */

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

/* The Rust half (src/hooks.rs); layout shared with `Call`. */
struct greenup_call {
    uint64_t start_ns;
    uint64_t low_since_ns;
    uint64_t backoff_ns;
    int32_t cpu;
    uint32_t flags;
};
extern void greenup_enter(struct greenup_call *c, uint64_t bytes, int strided);
extern void greenup_pending(uint64_t bytes, int strided);
extern void greenup_enter_sync(struct greenup_call *c);
extern void greenup_wait(struct greenup_call *c);
extern void greenup_leave(struct greenup_call *c);
extern int greenup_own_wait(void);
extern void greenup_init(int rank);
extern void greenup_finalize(void);

#pragma weak PMPI_Init
#pragma weak PMPI_Init_thread
#pragma weak PMPI_Finalize
#pragma weak PMPI_Comm_rank
#pragma weak PMPI_Comm_size
#pragma weak PMPI_Comm_remote_size
#pragma weak PMPI_Comm_test_inter
#pragma weak PMPI_Type_size
#pragma weak PMPI_Type_get_true_extent
#pragma weak MPI_Type_f2c
#pragma weak MPI_Comm_f2c
#pragma weak PMPI_Cancel
#pragma weak PMPI_Send
#pragma weak PMPI_Isend
#pragma weak PMPI_Recv
#pragma weak PMPI_Irecv
#pragma weak PMPI_Sendrecv
#pragma weak PMPI_Wait
#pragma weak PMPI_Test
#pragma weak PMPI_Waitall
#pragma weak PMPI_Testall
#pragma weak PMPI_Waitany
#pragma weak PMPI_Testany
#pragma weak PMPI_Waitsome
#pragma weak PMPI_Testsome
#pragma weak PMPI_Probe
#pragma weak PMPI_Iprobe
#pragma weak PMPI_Barrier
#pragma weak PMPI_Bcast
#pragma weak PMPI_Reduce
#pragma weak PMPI_Allreduce
#pragma weak PMPI_Alltoall
#pragma weak PMPI_Alltoallv
#pragma weak PMPI_Allgather
#pragma weak PMPI_Allgatherv
#pragma weak PMPI_Gather
#pragma weak PMPI_Scatter
#pragma weak PMPI_Put
#pragma weak PMPI_Get
#pragma weak PMPI_Accumulate
#pragma weak PMPI_Get_accumulate
#pragma weak PMPI_Win_fence
#pragma weak PMPI_Win_flush
#pragma weak PMPI_Win_flush_all
#pragma weak PMPI_Win_flush_local
#pragma weak PMPI_Win_flush_local_all
#pragma weak PMPI_Win_lock
#pragma weak PMPI_Win_unlock
#pragma weak PMPI_Win_lock_all
#pragma weak PMPI_Win_unlock_all
#pragma weak PMPI_Win_wait
#pragma weak PMPI_Win_complete

/* Open MPI's handle constants are addresses of its global objects: weak as well. */
#ifdef OPEN_MPI
#pragma weak ompi_mpi_comm_world
#pragma weak ompi_mpi_datatype_null
#pragma weak ompi_mpi_op_no_op
#endif

/* Bytes of `count` elements of `type`; sets *strided when the type has holes. A
 * predefined or user type only: the callers never pass an argument MPI says is
 * insignificant (MPI_IN_PLACE, non-root buffers), which could be garbage. */
static uint64_t bytes_of(int count, MPI_Datatype type, int *strided)
{
    int size = 0;
    MPI_Aint lb = 0, extent = 0;
    if (count <= 0 || type == MPI_DATATYPE_NULL)
        return 0;
    if (PMPI_Type_size(type, &size) != MPI_SUCCESS || size <= 0)
        return 0;
    if (PMPI_Type_get_true_extent(type, &lb, &extent) == MPI_SUCCESS && extent != (MPI_Aint)size)
        *strided = 1;
    return (uint64_t)count * (uint64_t)size;
}

/* The number of ranks a collective on `comm` exchanges with (the remote group's size for
 * an intercommunicator). */
static int peers(MPI_Comm comm)
{
    int inter = 0, n = 0;
    if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS)
        return 0;
    if ((inter ? PMPI_Comm_remote_size(comm, &n) : PMPI_Comm_size(comm, &n)) != MPI_SUCCESS)
        return 0;
    return n;
}

/* Whether this rank is `root` of an intracommunicator collective; false on an
 * intercommunicator, where the root arguments mean something else and are left alone. */
static int is_root(MPI_Comm comm, int root)
{
    int inter = 0, me = -1;
    if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter)
        return 0;
    return PMPI_Comm_rank(comm, &me) == MPI_SUCCESS && me == root;
}

static uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }

/* ---- initialization and end ---- */

static void after_init(void)
{
    int rank = 0;
    if (PMPI_Comm_rank(MPI_COMM_WORLD, &rank) != MPI_SUCCESS)
        rank = 0;
    greenup_init(rank);
}

int greenup_shim_MPI_Init(int *argc, char ***argv)
{
    int rc = PMPI_Init(argc, argv);
    if (rc == MPI_SUCCESS)
        after_init();
    return rc;
}

int greenup_shim_MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (rc == MPI_SUCCESS)
        after_init();
    return rc;
}

int greenup_shim_MPI_Finalize(void)
{
    greenup_finalize();
    return PMPI_Finalize();
}

/* ---- blocking point-to-point ---- */

/* Wait for one request by testing and backing off; the Rust side lowers the core after
 * the timeout and sleeps in block mode. */
static int wait_one(MPI_Request *req, MPI_Status *status, struct greenup_call *c)
{
    for (;;) {
        int done = 0, rc = PMPI_Test(req, &done, status);
        if (rc != MPI_SUCCESS || done)
            return rc;
        greenup_wait(c);
    }
}

static int wait_all(int n, MPI_Request reqs[], MPI_Status statuses[], struct greenup_call *c)
{
    for (;;) {
        int done = 0, rc = PMPI_Testall(n, reqs, &done, statuses);
        if (rc != MPI_SUCCESS || done)
            return rc;
        greenup_wait(c);
    }
}

int greenup_shim_MPI_Send(const void *buf, int count, MPI_Datatype type, int dest, int tag,
                          MPI_Comm comm)
{
    struct greenup_call c;
    int strided = 0, rc;
    uint64_t bytes = bytes_of(count, type, &strided);
    greenup_enter(&c, bytes, strided);
    if (greenup_own_wait()) {
        /* A blocking send is an Isend followed by a Wait (MPI 4.0, 3.7.3). */
        MPI_Request req;
        rc = PMPI_Isend(buf, count, type, dest, tag, comm, &req);
        if (rc == MPI_SUCCESS)
            rc = wait_one(&req, MPI_STATUS_IGNORE, &c);
    } else {
        rc = PMPI_Send(buf, count, type, dest, tag, comm);
    }
    greenup_leave(&c);
    return rc;
}

int greenup_shim_MPI_Recv(void *buf, int count, MPI_Datatype type, int source, int tag,
                          MPI_Comm comm, MPI_Status *status)
{
    struct greenup_call c;
    int strided = 0, rc;
    uint64_t bytes = bytes_of(count, type, &strided);
    greenup_enter(&c, bytes, strided);
    if (greenup_own_wait()) {
        MPI_Request req;
        rc = PMPI_Irecv(buf, count, type, source, tag, comm, &req);
        if (rc == MPI_SUCCESS)
            rc = wait_one(&req, status, &c);
    } else {
        rc = PMPI_Recv(buf, count, type, source, tag, comm, status);
    }
    greenup_leave(&c);
    return rc;
}

int greenup_shim_MPI_Sendrecv(const void *sbuf, int scount, MPI_Datatype stype, int dest,
                              int stag, void *rbuf, int rcount, MPI_Datatype rtype, int source,
                              int rtag, MPI_Comm comm, MPI_Status *status)
{
    struct greenup_call c;
    int strided = 0, rc;
    uint64_t bytes =
        max_u64(bytes_of(scount, stype, &strided), bytes_of(rcount, rtype, &strided));
    greenup_enter(&c, bytes, strided);
    if (greenup_own_wait()) {
        MPI_Request reqs[2];
        MPI_Status st[2];
        rc = PMPI_Irecv(rbuf, rcount, rtype, source, rtag, comm, &reqs[0]);
        if (rc == MPI_SUCCESS) {
            rc = PMPI_Isend(sbuf, scount, stype, dest, stag, comm, &reqs[1]);
            if (rc != MPI_SUCCESS) {
                /* The receive is posted: withdraw it before reporting the send's error. */
                (void)PMPI_Cancel(&reqs[0]);
                (void)PMPI_Wait(&reqs[0], MPI_STATUS_IGNORE);
            } else {
                rc = wait_all(2, reqs, st, &c);
                if (rc == MPI_ERR_IN_STATUS)
                    rc = st[0].MPI_ERROR != MPI_SUCCESS ? st[0].MPI_ERROR : st[1].MPI_ERROR;
                if (status != MPI_STATUS_IGNORE)
                    *status = st[0];
            }
        }
    } else {
        rc = PMPI_Sendrecv(sbuf, scount, stype, dest, stag, rbuf, rcount, rtype, source, rtag,
                           comm, status);
    }
    greenup_leave(&c);
    return rc;
}

int greenup_shim_MPI_Wait(MPI_Request *req, MPI_Status *status)
{
    struct greenup_call c;
    int rc;
    greenup_enter(&c, 0, 0);
    rc = greenup_own_wait() ? wait_one(req, status, &c) : PMPI_Wait(req, status);
    greenup_leave(&c);
    return rc;
}

int greenup_shim_MPI_Waitall(int n, MPI_Request reqs[], MPI_Status statuses[])
{
    struct greenup_call c;
    int rc;
    greenup_enter(&c, 0, 0);
    rc = greenup_own_wait() ? wait_all(n, reqs, statuses, &c) : PMPI_Waitall(n, reqs, statuses);
    greenup_leave(&c);
    return rc;
}

int greenup_shim_MPI_Waitany(int n, MPI_Request reqs[], int *index, MPI_Status *status)
{
    struct greenup_call c;
    int rc;
    greenup_enter(&c, 0, 0);
    if (greenup_own_wait()) {
        for (;;) {
            int done = 0;
            rc = PMPI_Testany(n, reqs, index, &done, status);
            if (rc != MPI_SUCCESS || done)
                break;
            greenup_wait(&c);
        }
    } else {
        rc = PMPI_Waitany(n, reqs, index, status);
    }
    greenup_leave(&c);
    return rc;
}

int greenup_shim_MPI_Waitsome(int n, MPI_Request reqs[], int *outcount, int indices[],
                              MPI_Status statuses[])
{
    struct greenup_call c;
    int rc;
    greenup_enter(&c, 0, 0);
    if (greenup_own_wait()) {
        for (;;) {
            rc = PMPI_Testsome(n, reqs, outcount, indices, statuses);
            if (rc != MPI_SUCCESS || *outcount != 0)
                break;
            greenup_wait(&c);
        }
    } else {
        rc = PMPI_Waitsome(n, reqs, outcount, indices, statuses);
    }
    greenup_leave(&c);
    return rc;
}

int greenup_shim_MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status *status)
{
    struct greenup_call c;
    int rc;
    greenup_enter(&c, 0, 0);
    if (greenup_own_wait()) {
        for (;;) {
            int found = 0;
            rc = PMPI_Iprobe(source, tag, comm, &found, status);
            if (rc != MPI_SUCCESS || found)
                break;
            greenup_wait(&c);
        }
    } else {
        rc = PMPI_Probe(source, tag, comm, status);
    }
    greenup_leave(&c);
    return rc;
}

/* ---- collectives: the byte threshold only ---- */

#define FORWARD(bytes, strided, call)                                                     \
    do {                                                                                  \
        struct greenup_call c_;                                                           \
        int rc_;                                                                          \
        greenup_enter(&c_, (bytes), (strided));                                           \
        rc_ = (call);                                                                     \
        greenup_leave(&c_);                                                               \
        return rc_;                                                                       \
    } while (0)

int greenup_shim_MPI_Barrier(MPI_Comm comm) { FORWARD(0, 0, PMPI_Barrier(comm)); }

int greenup_shim_MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm)
{
    int strided = 0;
    uint64_t bytes = bytes_of(count, type, &strided);
    FORWARD(bytes, strided, PMPI_Bcast(buf, count, type, root, comm));
}

int greenup_shim_MPI_Reduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type,
                            MPI_Op op, int root, MPI_Comm comm)
{
    int strided = 0;
    uint64_t bytes = bytes_of(count, type, &strided);
    FORWARD(bytes, strided, PMPI_Reduce(sbuf, rbuf, count, type, op, root, comm));
}

int greenup_shim_MPI_Allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type,
                               MPI_Op op, MPI_Comm comm)
{
    int strided = 0;
    uint64_t bytes = bytes_of(count, type, &strided);
    FORWARD(bytes, strided, PMPI_Allreduce(sbuf, rbuf, count, type, op, comm));
}

int greenup_shim_MPI_Alltoall(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                              int rcount, MPI_Datatype rtype, MPI_Comm comm)
{
    int strided = 0;
    uint64_t bytes = (uint64_t)peers(comm) * bytes_of(rcount, rtype, &strided);
    FORWARD(bytes, strided, PMPI_Alltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm));
}

int greenup_shim_MPI_Alltoallv(const void *sbuf, const int scounts[], const int sdispls[],
                               MPI_Datatype stype, void *rbuf, const int rcounts[],
                               const int rdispls[], MPI_Datatype rtype, MPI_Comm comm)
{
    int strided = 0, n = peers(comm), i;
    uint64_t bytes = 0;
    for (i = 0; i < n; i++)
        bytes += bytes_of(rcounts[i], rtype, &strided);
    FORWARD(bytes, strided,
            PMPI_Alltoallv(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm));
}

int greenup_shim_MPI_Allgather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                               int rcount, MPI_Datatype rtype, MPI_Comm comm)
{
    int strided = 0;
    uint64_t bytes = (uint64_t)peers(comm) * bytes_of(rcount, rtype, &strided);
    FORWARD(bytes, strided, PMPI_Allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm));
}

int greenup_shim_MPI_Allgatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                                const int rcounts[], const int displs[], MPI_Datatype rtype,
                                MPI_Comm comm)
{
    int strided = 0, n = peers(comm), i;
    uint64_t bytes = 0;
    for (i = 0; i < n; i++)
        bytes += bytes_of(rcounts[i], rtype, &strided);
    FORWARD(bytes, strided,
            PMPI_Allgatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm));
}

int greenup_shim_MPI_Gather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                            int rcount, MPI_Datatype rtype, int root, MPI_Comm comm)
{
    int strided = 0;
    uint64_t bytes = 0;
    if (is_root(comm, root))
        bytes = (uint64_t)peers(comm) * bytes_of(rcount, rtype, &strided);
    else if (sbuf != MPI_IN_PLACE)
        bytes = bytes_of(scount, stype, &strided);
    FORWARD(bytes, strided,
            PMPI_Gather(sbuf, scount, stype, rbuf, rcount, rtype, root, comm));
}

int greenup_shim_MPI_Scatter(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                             int rcount, MPI_Datatype rtype, int root, MPI_Comm comm)
{
    int strided = 0;
    uint64_t bytes = 0;
    if (is_root(comm, root))
        bytes = (uint64_t)peers(comm) * bytes_of(scount, stype, &strided);
    else if (rbuf != MPI_IN_PLACE)
        bytes = bytes_of(rcount, rtype, &strided);
    FORWARD(bytes, strided,
            PMPI_Scatter(sbuf, scount, stype, rbuf, rcount, rtype, root, comm));
}

/* ---- one-sided: the transfers are counted, and their bytes decide at the next
 * synchronization, where the waiting happens ---- */

#define RMA(bytes, strided, call)                                                         \
    do {                                                                                  \
        greenup_pending((bytes), (strided));                                              \
        FORWARD((bytes), (strided), call);                                                \
    } while (0)

int greenup_shim_MPI_Put(const void *obuf, int ocount, MPI_Datatype otype, int target,
                         MPI_Aint tdisp, int tcount, MPI_Datatype ttype, MPI_Win win)
{
    int strided = 0;
    uint64_t bytes = bytes_of(ocount, otype, &strided);
    (void)bytes_of(tcount, ttype, &strided);
    RMA(bytes, strided, PMPI_Put(obuf, ocount, otype, target, tdisp, tcount, ttype, win));
}

int greenup_shim_MPI_Get(void *obuf, int ocount, MPI_Datatype otype, int target,
                         MPI_Aint tdisp, int tcount, MPI_Datatype ttype, MPI_Win win)
{
    int strided = 0;
    uint64_t bytes = bytes_of(ocount, otype, &strided);
    (void)bytes_of(tcount, ttype, &strided);
    RMA(bytes, strided, PMPI_Get(obuf, ocount, otype, target, tdisp, tcount, ttype, win));
}

int greenup_shim_MPI_Accumulate(const void *obuf, int ocount, MPI_Datatype otype, int target,
                                MPI_Aint tdisp, int tcount, MPI_Datatype ttype, MPI_Op op,
                                MPI_Win win)
{
    int strided = 0;
    uint64_t bytes = bytes_of(ocount, otype, &strided);
    (void)bytes_of(tcount, ttype, &strided);
    RMA(bytes, strided,
        PMPI_Accumulate(obuf, ocount, otype, target, tdisp, tcount, ttype, op, win));
}

int greenup_shim_MPI_Get_accumulate(const void *obuf, int ocount, MPI_Datatype otype,
                                    void *rbuf, int rcount, MPI_Datatype rtype, int target,
                                    MPI_Aint tdisp, int tcount, MPI_Datatype ttype, MPI_Op op,
                                    MPI_Win win)
{
    int strided = 0;
    uint64_t bytes = max_u64(bytes_of(rcount, rtype, &strided),
                             op == MPI_NO_OP ? 0 : bytes_of(ocount, otype, &strided));
    (void)bytes_of(tcount, ttype, &strided);
    RMA(bytes, strided,
        PMPI_Get_accumulate(obuf, ocount, otype, rbuf, rcount, rtype, target, tdisp, tcount,
                            ttype, op, win));
}

#define SYNC(call)                                                                        \
    do {                                                                                  \
        struct greenup_call c_;                                                           \
        int rc_;                                                                          \
        greenup_enter_sync(&c_);                                                          \
        rc_ = (call);                                                                     \
        greenup_leave(&c_);                                                               \
        return rc_;                                                                       \
    } while (0)

int greenup_shim_MPI_Win_fence(int assert, MPI_Win win) { SYNC(PMPI_Win_fence(assert, win)); }
int greenup_shim_MPI_Win_flush(int rank, MPI_Win win) { SYNC(PMPI_Win_flush(rank, win)); }
int greenup_shim_MPI_Win_flush_all(MPI_Win win) { SYNC(PMPI_Win_flush_all(win)); }
int greenup_shim_MPI_Win_flush_local(int rank, MPI_Win win)
{
    SYNC(PMPI_Win_flush_local(rank, win));
}
int greenup_shim_MPI_Win_flush_local_all(MPI_Win win) { SYNC(PMPI_Win_flush_local_all(win)); }
int greenup_shim_MPI_Win_lock(int type, int rank, int assert, MPI_Win win)
{
    SYNC(PMPI_Win_lock(type, rank, assert, win));
}
int greenup_shim_MPI_Win_unlock(int rank, MPI_Win win) { SYNC(PMPI_Win_unlock(rank, win)); }
int greenup_shim_MPI_Win_lock_all(int assert, MPI_Win win)
{
    SYNC(PMPI_Win_lock_all(assert, win));
}
int greenup_shim_MPI_Win_unlock_all(MPI_Win win) { SYNC(PMPI_Win_unlock_all(win)); }
int greenup_shim_MPI_Win_wait(MPI_Win win) { SYNC(PMPI_Win_wait(win)); }
int greenup_shim_MPI_Win_complete(MPI_Win win) { SYNC(PMPI_Win_complete(win)); }

/* ---- Fortran (mpif.h and `use mpi`, gfortran's trailing underscore) ----
 *
 * Open MPI's Fortran bindings call PMPI_ directly, so a Fortran program never passes
 * through the C wrappers above. These forward to the library's pmpi_*_ entry points and
 * apply the byte threshold; waiting stays the MPI's own. */

#define FDECL(name, ...) extern void name(__VA_ARGS__) __attribute__((weak))
typedef MPI_Fint F;
FDECL(pmpi_init_, F *);
FDECL(pmpi_init_thread_, F *, F *, F *);
FDECL(pmpi_finalize_, F *);
FDECL(pmpi_send_, void *, F *, F *, F *, F *, F *, F *);
FDECL(pmpi_recv_, void *, F *, F *, F *, F *, F *, F *, F *);
FDECL(pmpi_sendrecv_, void *, F *, F *, F *, F *, void *, F *, F *, F *, F *, F *, F *, F *);
FDECL(pmpi_wait_, F *, F *, F *);
FDECL(pmpi_waitall_, F *, F *, F *, F *);
FDECL(pmpi_barrier_, F *, F *);
FDECL(pmpi_bcast_, void *, F *, F *, F *, F *, F *);
FDECL(pmpi_reduce_, void *, void *, F *, F *, F *, F *, F *, F *);
FDECL(pmpi_allreduce_, void *, void *, F *, F *, F *, F *, F *);
FDECL(pmpi_alltoall_, void *, F *, F *, void *, F *, F *, F *, F *);
FDECL(pmpi_allgather_, void *, F *, F *, void *, F *, F *, F *, F *);
FDECL(pmpi_put_, void *, F *, F *, F *, MPI_Aint *, F *, F *, F *, F *);
FDECL(pmpi_get_, void *, F *, F *, F *, MPI_Aint *, F *, F *, F *, F *);
FDECL(pmpi_accumulate_, void *, F *, F *, F *, MPI_Aint *, F *, F *, F *, F *, F *);
FDECL(pmpi_win_fence_, F *, F *, F *);
FDECL(pmpi_win_flush_, F *, F *, F *);
FDECL(pmpi_win_unlock_, F *, F *, F *);
FDECL(pmpi_win_unlock_all_, F *, F *);

/* A Fortran entry point the MPI library lacks: report an error, as the MPI would. */
#define FCALL(fn, ierr, ...)                                                              \
    do {                                                                                  \
        if (fn)                                                                           \
            fn(__VA_ARGS__);                                                              \
        else                                                                              \
            *(ierr) = MPI_ERR_INTERN;                                                     \
    } while (0)

static uint64_t fbytes(const F *count, const F *type, int *strided)
{
    return bytes_of((int)*count, MPI_Type_f2c(*type), strided);
}

static int fpeers(const F *comm) { return peers(MPI_Comm_f2c(*comm)); }

#define FWRAP(bytes, strided, fn, ierr, ...)                                              \
    do {                                                                                  \
        struct greenup_call c_;                                                           \
        greenup_enter(&c_, (bytes), (strided));                                           \
        FCALL(fn, ierr, __VA_ARGS__);                                                     \
        greenup_leave(&c_);                                                               \
    } while (0)

void greenup_shim_mpi_init_(F *ierr)
{
    FCALL(pmpi_init_, ierr, ierr);
    if (*ierr == MPI_SUCCESS)
        after_init();
}

void greenup_shim_mpi_init_thread_(F *required, F *provided, F *ierr)
{
    FCALL(pmpi_init_thread_, ierr, required, provided, ierr);
    if (*ierr == MPI_SUCCESS)
        after_init();
}

void greenup_shim_mpi_finalize_(F *ierr)
{
    greenup_finalize();
    FCALL(pmpi_finalize_, ierr, ierr);
}

void greenup_shim_mpi_send_(void *buf, F *count, F *type, F *dest, F *tag, F *comm, F *ierr)
{
    int s = 0;
    uint64_t b = fbytes(count, type, &s);
    FWRAP(b, s, pmpi_send_, ierr, buf, count, type, dest, tag, comm, ierr);
}

void greenup_shim_mpi_recv_(void *buf, F *count, F *type, F *src, F *tag, F *comm, F *status,
                            F *ierr)
{
    int s = 0;
    uint64_t b = fbytes(count, type, &s);
    FWRAP(b, s, pmpi_recv_, ierr, buf, count, type, src, tag, comm, status, ierr);
}

void greenup_shim_mpi_sendrecv_(void *sbuf, F *scount, F *stype, F *dest, F *stag, void *rbuf,
                                F *rcount, F *rtype, F *src, F *rtag, F *comm, F *status,
                                F *ierr)
{
    int s = 0;
    uint64_t b = max_u64(fbytes(scount, stype, &s), fbytes(rcount, rtype, &s));
    FWRAP(b, s, pmpi_sendrecv_, ierr, sbuf, scount, stype, dest, stag, rbuf, rcount, rtype, src,
          rtag, comm, status, ierr);
}

void greenup_shim_mpi_wait_(F *req, F *status, F *ierr)
{
    FWRAP(0, 0, pmpi_wait_, ierr, req, status, ierr);
}

void greenup_shim_mpi_waitall_(F *n, F *reqs, F *statuses, F *ierr)
{
    FWRAP(0, 0, pmpi_waitall_, ierr, n, reqs, statuses, ierr);
}

void greenup_shim_mpi_barrier_(F *comm, F *ierr) { FWRAP(0, 0, pmpi_barrier_, ierr, comm, ierr); }

void greenup_shim_mpi_bcast_(void *buf, F *count, F *type, F *root, F *comm, F *ierr)
{
    int s = 0;
    uint64_t b = fbytes(count, type, &s);
    FWRAP(b, s, pmpi_bcast_, ierr, buf, count, type, root, comm, ierr);
}

void greenup_shim_mpi_reduce_(void *sbuf, void *rbuf, F *count, F *type, F *op, F *root,
                              F *comm, F *ierr)
{
    int s = 0;
    uint64_t b = fbytes(count, type, &s);
    FWRAP(b, s, pmpi_reduce_, ierr, sbuf, rbuf, count, type, op, root, comm, ierr);
}

void greenup_shim_mpi_allreduce_(void *sbuf, void *rbuf, F *count, F *type, F *op, F *comm,
                                 F *ierr)
{
    int s = 0;
    uint64_t b = fbytes(count, type, &s);
    FWRAP(b, s, pmpi_allreduce_, ierr, sbuf, rbuf, count, type, op, comm, ierr);
}

void greenup_shim_mpi_alltoall_(void *sbuf, F *scount, F *stype, void *rbuf, F *rcount,
                                F *rtype, F *comm, F *ierr)
{
    int s = 0;
    uint64_t b = (uint64_t)fpeers(comm) * fbytes(rcount, rtype, &s);
    FWRAP(b, s, pmpi_alltoall_, ierr, sbuf, scount, stype, rbuf, rcount, rtype, comm, ierr);
}

void greenup_shim_mpi_allgather_(void *sbuf, F *scount, F *stype, void *rbuf, F *rcount,
                                 F *rtype, F *comm, F *ierr)
{
    int s = 0;
    uint64_t b = (uint64_t)fpeers(comm) * fbytes(rcount, rtype, &s);
    FWRAP(b, s, pmpi_allgather_, ierr, sbuf, scount, stype, rbuf, rcount, rtype, comm, ierr);
}

#define FRMA(b, s, fn, ierr, ...)                                                         \
    do {                                                                                  \
        greenup_pending((b), (s));                                                        \
        FWRAP(b, s, fn, ierr, __VA_ARGS__);                                               \
    } while (0)

void greenup_shim_mpi_put_(void *obuf, F *ocount, F *otype, F *target, MPI_Aint *tdisp,
                           F *tcount, F *ttype, F *win, F *ierr)
{
    int s = 0;
    uint64_t b = fbytes(ocount, otype, &s);
    FRMA(b, s, pmpi_put_, ierr, obuf, ocount, otype, target, tdisp, tcount, ttype, win, ierr);
}

void greenup_shim_mpi_get_(void *obuf, F *ocount, F *otype, F *target, MPI_Aint *tdisp,
                           F *tcount, F *ttype, F *win, F *ierr)
{
    int s = 0;
    uint64_t b = fbytes(ocount, otype, &s);
    FRMA(b, s, pmpi_get_, ierr, obuf, ocount, otype, target, tdisp, tcount, ttype, win, ierr);
}

void greenup_shim_mpi_accumulate_(void *obuf, F *ocount, F *otype, F *target, MPI_Aint *tdisp,
                                  F *tcount, F *ttype, F *op, F *win, F *ierr)
{
    int s = 0;
    uint64_t b = fbytes(ocount, otype, &s);
    FRMA(b, s, pmpi_accumulate_, ierr, obuf, ocount, otype, target, tdisp, tcount, ttype, op,
         win, ierr);
}

#define FSYNC(fn, ierr, ...)                                                              \
    do {                                                                                  \
        struct greenup_call c_;                                                           \
        greenup_enter_sync(&c_);                                                          \
        FCALL(fn, ierr, __VA_ARGS__);                                                     \
        greenup_leave(&c_);                                                               \
    } while (0)

void greenup_shim_mpi_win_fence_(F *assert, F *win, F *ierr)
{
    FSYNC(pmpi_win_fence_, ierr, assert, win, ierr);
}
void greenup_shim_mpi_win_flush_(F *rank, F *win, F *ierr)
{
    FSYNC(pmpi_win_flush_, ierr, rank, win, ierr);
}
void greenup_shim_mpi_win_unlock_(F *rank, F *win, F *ierr)
{
    FSYNC(pmpi_win_unlock_, ierr, rank, win, ierr);
}
void greenup_shim_mpi_win_unlock_all_(F *win, F *ierr)
{
    FSYNC(pmpi_win_unlock_all_, ierr, win, ierr);
}
