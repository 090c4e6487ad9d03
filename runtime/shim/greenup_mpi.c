/* greenup's MPI shim: the typed half of libgreenup_mpi.so.
 *
 * Compiled against the MPI library's own mpi.h, so handles, statuses and constants are
 * that library's. Each wrapper works out how many bytes the call moves and whether they
 * are contiguous, asks the Rust side (greenup_enter) whether to lower the core's
 * frequency, calls the PMPI_ entry point, and tells the Rust side when the call is over
 * (greenup_leave). The exported MPI_ names are trampolines in the Rust half that jump
 * here (src/shim.rs says why).
 *
 * Blocking point-to-point calls, waits and MPI_Win_wait, whose waiting can be split into
 * test + back-off, are waited on here (own_wait), so that a call that lasts longer than
 * the timeout can be lowered, and in `block` mode sleep instead of spinning; in block
 * mode a fence first waits in a barrier of greenup's own (see "windows" below).
 * Collectives and the other one-sided synchronizations cannot be split without changing
 * which calls match, so only the byte threshold applies to them. Nonblocking calls leave
 * their request's bytes in a table (src/requests.rs) for the wait that completes it.
 *
 * PMPI_ and pmpi_*_ are weak references: preloaded into a program without MPI, the
 * library loads, resolves nothing and is never called. */

#define _GNU_SOURCE /* RTLD_NEXT */
#include <dlfcn.h>
#include <mpi.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The Rust half (src/hooks.rs); layout shared with `Call`, which only Rust reads. */
struct greenup_call {
    uint64_t start_ns;
    uint64_t low_since_ns;
    uint64_t backoff_ns;
    int32_t lowered;
    uint32_t active;
};
extern void greenup_enter(struct greenup_call *c, uint64_t bytes, int strided);
extern void greenup_pending(uint64_t bytes, int strided);
extern void greenup_enter_sync(struct greenup_call *c);
extern void greenup_enter_post(struct greenup_call *c, uint64_t bytes, int strided);
extern void greenup_enter_wait(struct greenup_call *c, const uint64_t *keys, int n, int any);
extern void greenup_track(uint64_t key, uint64_t bytes, int strided);
extern void greenup_forget(uint64_t key);
extern int greenup_tracking(void);
extern int greenup_fence_blocks(void);
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
#pragma weak MPI_Request_f2c
#pragma weak MPI_Win_f2c
#pragma weak PMPI_Cancel
#pragma weak PMPI_Send
#pragma weak PMPI_Isend
#pragma weak PMPI_Recv
#pragma weak PMPI_Irecv
#pragma weak PMPI_Issend
#pragma weak PMPI_Irsend
#pragma weak PMPI_Ibsend
#pragma weak PMPI_Request_free
#pragma weak PMPI_Ibarrier
#pragma weak PMPI_Comm_group
#pragma weak PMPI_Comm_create
#pragma weak PMPI_Group_free
#pragma weak PMPI_Comm_free
#pragma weak PMPI_Rput
#pragma weak PMPI_Rget
#pragma weak PMPI_Raccumulate
#pragma weak PMPI_Rget_accumulate
#pragma weak PMPI_Win_create
#pragma weak PMPI_Win_allocate
#pragma weak PMPI_Win_allocate_shared
#pragma weak PMPI_Win_create_dynamic
#pragma weak PMPI_Win_create_keyval
#pragma weak PMPI_Win_set_attr
#pragma weak PMPI_Win_get_attr
#pragma weak PMPI_Win_delete_attr
#pragma weak PMPI_Win_test
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
#pragma weak ompi_mpi_op_min
#pragma weak ompi_mpi_int
#pragma weak ompi_mpi_comm_null
#pragma weak ompi_request_null
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

/* This rank's place among the ranks of `comm` whose blocks it receives: its rank in an
 * intracommunicator, -1 in an intercommunicator (the remote group never includes it). A
 * rank's block to itself is a copy in its own memory, which no network carries: the
 * counts leave it out, and a collective of a rank alone is no communication at all
 * (COLLECTIVE), so one rank alone counts no call and no byte, as paper 000's M(1) and
 * B(1) are 0. */
static int self_in(MPI_Comm comm)
{
    int inter = 0, me = -1;
    if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter ||
        PMPI_Comm_rank(comm, &me) != MPI_SUCCESS)
        return -1;
    return me;
}

/* The ranks other than this one that a collective on `comm` exchanges with. */
static int others(MPI_Comm comm)
{
    int n = peers(comm);
    return self_in(comm) >= 0 && n > 0 ? n - 1 : n;
}

/* The sum of `counts` over the ranks other than this one. */
static uint64_t others_sum(MPI_Comm comm, const int counts[], MPI_Datatype type, int *strided)
{
    int n = peers(comm), me = self_in(comm), i;
    uint64_t bytes = 0;
    for (i = 0; i < n; i++)
        if (i != me)
            bytes += bytes_of(counts[i], type, strided);
    return bytes;
}

/* Bytes of a rooted collective (Gather, Scatter): the root moves one block of
 * `root_count` x `root_type` per other rank, any other rank one block of its own. Zero
 * on an intercommunicator, where which arguments matter depends on the group: greenup
 * reads none of them rather than one that may be garbage. */
static uint64_t rooted(MPI_Comm comm, int root, int root_count, MPI_Datatype root_type,
                       int count, MPI_Datatype type, int *strided)
{
    int me = self_in(comm);
    if (me < 0)
        return 0;
    if (me == root)
        return (uint64_t)others(comm) * bytes_of(root_count, root_type, strided);
    return bytes_of(count, type, strided);
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

/* A blocking transfer of `bytes`: greenup starts it nonblocking (`start`, which fills
 * `req_`) and waits for it, or the MPI does it (`blocking`). A blocking call is its
 * nonblocking form followed by MPI_Wait (MPI 4.0, 3.7.3). */
#define TRANSFER(bytes, strided, start, status, blocking)                                 \
    do {                                                                                  \
        struct greenup_call c_;                                                           \
        MPI_Request req_;                                                                 \
        int rc_;                                                                          \
        greenup_enter(&c_, (bytes), (strided));                                           \
        if (greenup_own_wait()) {                                                         \
            rc_ = (start);                                                                \
            if (rc_ == MPI_SUCCESS)                                                       \
                rc_ = wait_one(&req_, (status), &c_);                                     \
        } else {                                                                          \
            rc_ = (blocking);                                                             \
        }                                                                                 \
        greenup_leave(&c_);                                                               \
        return rc_;                                                                       \
    } while (0)

int greenup_shim_MPI_Send(const void *buf, int count, MPI_Datatype type, int dest, int tag,
                          MPI_Comm comm)
{
    int strided = 0;
    uint64_t bytes = bytes_of(count, type, &strided);
    TRANSFER(bytes, strided, PMPI_Isend(buf, count, type, dest, tag, comm, &req_),
             MPI_STATUS_IGNORE, PMPI_Send(buf, count, type, dest, tag, comm));
}

int greenup_shim_MPI_Recv(void *buf, int count, MPI_Datatype type, int source, int tag,
                          MPI_Comm comm, MPI_Status *status)
{
    int strided = 0;
    uint64_t bytes = bytes_of(count, type, &strided);
    TRANSFER(bytes, strided, PMPI_Irecv(buf, count, type, source, tag, comm, &req_), status,
             PMPI_Recv(buf, count, type, source, tag, comm, status));
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

/* A blocking wait: `enter` tells the Rust side what it waits for; then greenup waits
 * (`test`, repeated with back-off until `done`), or the MPI does (`blocking`). */
#define WAIT(rc, enter, test, done, blocking)                                             \
    do {                                                                                  \
        struct greenup_call c_;                                                           \
        enter;                                                                            \
        if (greenup_own_wait()) {                                                         \
            for (;;) {                                                                    \
                (rc) = (test);                                                            \
                if ((rc) != MPI_SUCCESS || (done))                                        \
                    break;                                                                \
                greenup_wait(&c_);                                                        \
            }                                                                             \
        } else {                                                                          \
            (rc) = (blocking);                                                            \
        }                                                                                 \
        greenup_leave(&c_);                                                               \
    } while (0)

/* ---- nonblocking requests ----
 *
 * A request's handle, as the bits the Rust side keys its table with (0: none). MPI_Request
 * is a pointer in Open MPI and an int in MPICH; either fits. */
static uint64_t key_of(MPI_Request r)
{
    uint64_t k = 0;
    if (r == MPI_REQUEST_NULL)
        return 0;
    memcpy(&k, &r, sizeof r < sizeof k ? sizeof r : sizeof k);
    return k;
}

static uint64_t fkey(const MPI_Fint *r) { return key_of(MPI_Request_f2c(*r)); }

/* The keys of an array of requests, read before a wait or test overwrites the completed
 * ones with MPI_REQUEST_NULL. None (n 0) when the table is off or memory is short: the
 * wait then decides by the timeout alone. */
struct keys {
    int n;
    uint64_t *k;
    uint64_t local[16];
};

static int keys_start(struct keys *ks, int n)
{
    ks->n = 0;
    ks->k = ks->local;
    if (n <= 0 || !greenup_tracking())
        return 0;
    if (n > (int)(sizeof ks->local / sizeof ks->local[0]) &&
        !(ks->k = malloc(sizeof(uint64_t) * (size_t)n))) {
        ks->k = ks->local;
        return 0;
    }
    ks->n = n;
    return 1;
}

static void keys_c(struct keys *ks, int n, const MPI_Request reqs[])
{
    if (keys_start(ks, n))
        for (int i = 0; i < n; i++)
            ks->k[i] = key_of(reqs[i]);
}

static void keys_f(struct keys *ks, int n, const MPI_Fint reqs[])
{
    if (keys_start(ks, n))
        for (int i = 0; i < n; i++)
            ks->k[i] = fkey(&reqs[i]);
}

static void keys_end(struct keys *ks)
{
    if (ks->k != ks->local)
        free(ks->k);
}

/* Forget the requests a Waitany/Testany (`index`, or MPI_UNDEFINED) or a
 * Waitsome/Testsome (`count` of `indices`) completed; `base` is 1 for Fortran's
 * indices. */
static void forget_some(const struct keys *ks, int count, const int indices[], int base)
{
    if (count == MPI_UNDEFINED)
        return;
    for (int i = 0; i < count; i++) {
        int at = indices[i] - base;
        if (at >= 0 && at < ks->n)
            greenup_forget(ks->k[at]);
    }
}

static void forget_all(const struct keys *ks)
{
    for (int i = 0; i < ks->n; i++)
        greenup_forget(ks->k[i]);
}

/* A call that posts a transfer of `bytes` and returns its request in `*req`: counted
 * now, never lowered; the request is remembered with its bytes for its wait. */
#define POST(bytes, strided, req, call)                                                   \
    do {                                                                                  \
        struct greenup_call c_;                                                           \
        int rc_;                                                                          \
        greenup_enter_post(&c_, (bytes), (strided));                                      \
        rc_ = (call);                                                                     \
        if (rc_ == MPI_SUCCESS && (bytes) > 0)                                            \
            greenup_track(key_of(*(req)), (bytes), (strided));                            \
        greenup_leave(&c_);                                                               \
        return rc_;                                                                       \
    } while (0)

#define ISEND(name)                                                                       \
    int greenup_shim_MPI_##name(const void *buf, int count, MPI_Datatype type, int dest,  \
                                int tag, MPI_Comm comm, MPI_Request *req)                 \
    {                                                                                     \
        int strided = 0;                                                                  \
        uint64_t bytes = bytes_of(count, type, &strided);                                 \
        POST(bytes, strided, req, PMPI_##name(buf, count, type, dest, tag, comm, req));   \
    }

ISEND(Isend)
ISEND(Issend)
ISEND(Irsend)
ISEND(Ibsend)

int greenup_shim_MPI_Irecv(void *buf, int count, MPI_Datatype type, int source, int tag,
                           MPI_Comm comm, MPI_Request *req)
{
    int strided = 0;
    uint64_t bytes = bytes_of(count, type, &strided);
    POST(bytes, strided, req, PMPI_Irecv(buf, count, type, source, tag, comm, req));
}

int greenup_shim_MPI_Wait(MPI_Request *req, MPI_Status *status)
{
    int done = 0, rc;
    uint64_t key = greenup_tracking() ? key_of(*req) : 0;
    WAIT(rc, greenup_enter_wait(&c_, &key, 1, 0), PMPI_Test(req, &done, status), done,
         PMPI_Wait(req, status));
    return rc;
}

int greenup_shim_MPI_Waitall(int n, MPI_Request reqs[], MPI_Status statuses[])
{
    int done = 0, rc;
    struct keys ks = {0};
    keys_c(&ks, n, reqs);
    WAIT(rc, greenup_enter_wait(&c_, ks.k, ks.n, 0), PMPI_Testall(n, reqs, &done, statuses),
         done, PMPI_Waitall(n, reqs, statuses));
    keys_end(&ks);
    return rc;
}

int greenup_shim_MPI_Waitany(int n, MPI_Request reqs[], int *index, MPI_Status *status)
{
    int done = 0, rc;
    struct keys ks = {0};
    keys_c(&ks, n, reqs);
    WAIT(rc, greenup_enter_wait(&c_, ks.k, ks.n, 1), PMPI_Testany(n, reqs, index, &done, status),
         done, PMPI_Waitany(n, reqs, index, status));
    if (rc == MPI_SUCCESS)
        forget_some(&ks, 1, index, 0);
    keys_end(&ks);
    return rc;
}

int greenup_shim_MPI_Waitsome(int n, MPI_Request reqs[], int *outcount, int indices[],
                              MPI_Status statuses[])
{
    int rc;
    struct keys ks = {0};
    keys_c(&ks, n, reqs);
    WAIT(rc, greenup_enter_wait(&c_, ks.k, ks.n, 1),
         PMPI_Testsome(n, reqs, outcount, indices, statuses), *outcount != 0,
         PMPI_Waitsome(n, reqs, outcount, indices, statuses));
    if (rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS)
        forget_some(&ks, *outcount, indices, 0);
    keys_end(&ks);
    return rc;
}

/* Tests wait for nothing: counted as calls that wait for nothing (never lowered, no
 * progress for the guard); a request they complete leaves the table. */
int greenup_shim_MPI_Test(MPI_Request *req, int *flag, MPI_Status *status)
{
    struct greenup_call c;
    uint64_t key = greenup_tracking() ? key_of(*req) : 0;
    int rc;
    greenup_enter_post(&c, 0, 0);
    rc = PMPI_Test(req, flag, status);
    if (rc == MPI_SUCCESS && *flag && key)
        greenup_forget(key);
    greenup_leave(&c);
    return rc;
}

/* A test on the array `reqs` of `n`: `forget` (given the keys ks_ and the return rc_)
 * removes the requests it completed from the table. */
#define TESTS(n, reqs, call, forget)                                                      \
    do {                                                                                  \
        struct greenup_call c_;                                                           \
        struct keys ks_;                                                                  \
        int rc_;                                                                          \
        keys_c(&ks_, (n), (reqs));                                                        \
        greenup_enter_post(&c_, 0, 0);                                                    \
        rc_ = (call);                                                                     \
        forget;                                                                           \
        greenup_leave(&c_);                                                               \
        keys_end(&ks_);                                                                   \
        return rc_;                                                                       \
    } while (0)

int greenup_shim_MPI_Testall(int n, MPI_Request reqs[], int *flag, MPI_Status statuses[])
{
    TESTS(n, reqs, PMPI_Testall(n, reqs, flag, statuses),
          if (rc_ == MPI_SUCCESS && *flag) forget_all(&ks_));
}

int greenup_shim_MPI_Testany(int n, MPI_Request reqs[], int *index, int *flag,
                             MPI_Status *status)
{
    TESTS(n, reqs, PMPI_Testany(n, reqs, index, flag, status),
          if (rc_ == MPI_SUCCESS && *flag) forget_some(&ks_, 1, index, 0));
}

int greenup_shim_MPI_Testsome(int n, MPI_Request reqs[], int *outcount, int indices[],
                              MPI_Status statuses[])
{
    TESTS(n, reqs, PMPI_Testsome(n, reqs, outcount, indices, statuses),
          if (rc_ == MPI_SUCCESS || rc_ == MPI_ERR_IN_STATUS)
              forget_some(&ks_, *outcount, indices, 0));
}

/* Not counted: it moves and waits for nothing. The request leaves the table. */
int greenup_shim_MPI_Request_free(MPI_Request *req)
{
    uint64_t key = greenup_tracking() ? key_of(*req) : 0;
    int rc = PMPI_Request_free(req);
    if (key)
        greenup_forget(key);
    return rc;
}

int greenup_shim_MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status *status)
{
    int found = 0, rc;
    WAIT(rc, greenup_enter(&c_, 0, 0), PMPI_Iprobe(source, tag, comm, &found, status), found,
         PMPI_Probe(source, tag, comm, status));
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

/* A collective on `comm`: where the rank is alone it is a copy in the rank's own memory,
 * not communication, so it goes through uncounted and its time is the rank's own. */
#define COLLECTIVE(comm, bytes, strided, call)                                            \
    do {                                                                                  \
        if (others(comm) == 0)                                                            \
            return (call);                                                                \
        FORWARD((bytes), (strided), call);                                                \
    } while (0)

int greenup_shim_MPI_Barrier(MPI_Comm comm) { COLLECTIVE(comm, 0, 0, PMPI_Barrier(comm)); }

int greenup_shim_MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm)
{
    int strided = 0;
    uint64_t bytes = bytes_of(count, type, &strided);
    COLLECTIVE(comm, bytes, strided, PMPI_Bcast(buf, count, type, root, comm));
}

int greenup_shim_MPI_Reduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type,
                            MPI_Op op, int root, MPI_Comm comm)
{
    int strided = 0;
    uint64_t bytes = bytes_of(count, type, &strided);
    COLLECTIVE(comm, bytes, strided, PMPI_Reduce(sbuf, rbuf, count, type, op, root, comm));
}

int greenup_shim_MPI_Allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type,
                               MPI_Op op, MPI_Comm comm)
{
    int strided = 0;
    uint64_t bytes = bytes_of(count, type, &strided);
    COLLECTIVE(comm, bytes, strided, PMPI_Allreduce(sbuf, rbuf, count, type, op, comm));
}

int greenup_shim_MPI_Alltoall(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                              int rcount, MPI_Datatype rtype, MPI_Comm comm)
{
    int strided = 0;
    uint64_t bytes = (uint64_t)others(comm) * bytes_of(rcount, rtype, &strided);
    COLLECTIVE(comm, bytes, strided, PMPI_Alltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm));
}

int greenup_shim_MPI_Alltoallv(const void *sbuf, const int scounts[], const int sdispls[],
                               MPI_Datatype stype, void *rbuf, const int rcounts[],
                               const int rdispls[], MPI_Datatype rtype, MPI_Comm comm)
{
    int strided = 0;
    uint64_t bytes = others_sum(comm, rcounts, rtype, &strided);
    COLLECTIVE(comm, bytes, strided,
            PMPI_Alltoallv(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm));
}

int greenup_shim_MPI_Allgather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                               int rcount, MPI_Datatype rtype, MPI_Comm comm)
{
    int strided = 0;
    uint64_t bytes = (uint64_t)others(comm) * bytes_of(rcount, rtype, &strided);
    COLLECTIVE(comm, bytes, strided, PMPI_Allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm));
}

int greenup_shim_MPI_Allgatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                                const int rcounts[], const int displs[], MPI_Datatype rtype,
                                MPI_Comm comm)
{
    int strided = 0;
    uint64_t bytes = others_sum(comm, rcounts, rtype, &strided);
    COLLECTIVE(comm, bytes, strided,
            PMPI_Allgatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm));
}

int greenup_shim_MPI_Gather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                            int rcount, MPI_Datatype rtype, int root, MPI_Comm comm)
{
    int strided = 0;
    uint64_t bytes = rooted(comm, root, rcount, rtype, scount, stype, &strided);
    COLLECTIVE(comm, bytes, strided,
            PMPI_Gather(sbuf, scount, stype, rbuf, rcount, rtype, root, comm));
}

int greenup_shim_MPI_Scatter(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                             int rcount, MPI_Datatype rtype, int root, MPI_Comm comm)
{
    int strided = 0;
    uint64_t bytes = rooted(comm, root, scount, stype, rcount, rtype, &strided);
    COLLECTIVE(comm, bytes, strided,
            PMPI_Scatter(sbuf, scount, stype, rbuf, rcount, rtype, root, comm));
}

/* ---- one-sided: a transfer call only starts the transfer; its bytes are counted and
 * decide at the next synchronization, where the waiting happens ---- */

/* A one-sided transfer's bytes are the origin's; it is strided if either side's type is. */
static uint64_t origin_bytes(int ocount, MPI_Datatype otype, int tcount, MPI_Datatype ttype,
                             int *strided)
{
    (void)bytes_of(tcount, ttype, strided);
    return bytes_of(ocount, otype, strided);
}

#define RMA(bytes, strided, call)                                                         \
    do {                                                                                  \
        struct greenup_call c_;                                                           \
        int rc_;                                                                          \
        greenup_pending((bytes), (strided));                                              \
        greenup_enter_post(&c_, 0, 0);                                                    \
        rc_ = (call);                                                                     \
        greenup_leave(&c_);                                                               \
        return rc_;                                                                       \
    } while (0)

int greenup_shim_MPI_Put(const void *obuf, int ocount, MPI_Datatype otype, int target,
                         MPI_Aint tdisp, int tcount, MPI_Datatype ttype, MPI_Win win)
{
    int strided = 0;
    uint64_t bytes = origin_bytes(ocount, otype, tcount, ttype, &strided);
    RMA(bytes, strided, PMPI_Put(obuf, ocount, otype, target, tdisp, tcount, ttype, win));
}

int greenup_shim_MPI_Get(void *obuf, int ocount, MPI_Datatype otype, int target,
                         MPI_Aint tdisp, int tcount, MPI_Datatype ttype, MPI_Win win)
{
    int strided = 0;
    uint64_t bytes = origin_bytes(ocount, otype, tcount, ttype, &strided);
    RMA(bytes, strided, PMPI_Get(obuf, ocount, otype, target, tdisp, tcount, ttype, win));
}

int greenup_shim_MPI_Accumulate(const void *obuf, int ocount, MPI_Datatype otype, int target,
                                MPI_Aint tdisp, int tcount, MPI_Datatype ttype, MPI_Op op,
                                MPI_Win win)
{
    int strided = 0;
    uint64_t bytes = origin_bytes(ocount, otype, tcount, ttype, &strided);
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

/* Request-based one-sided transfers: counted at once, like the ones above; their bytes
 * decide at the wait on their request (where an MPI_Rget's data has arrived), not at the
 * next synchronization. */
#define RPUTGET(name, origin)                                                             \
    int greenup_shim_MPI_##name(origin *obuf, int ocount, MPI_Datatype otype, int target,  \
                                MPI_Aint tdisp, int tcount, MPI_Datatype ttype, MPI_Win win,\
                                MPI_Request *req)                                         \
    {                                                                                     \
        int strided = 0;                                                                  \
        uint64_t bytes = origin_bytes(ocount, otype, tcount, ttype, &strided);            \
        POST(bytes, strided, req,                                                         \
             PMPI_##name(obuf, ocount, otype, target, tdisp, tcount, ttype, win, req));   \
    }

RPUTGET(Rput, const void)
RPUTGET(Rget, void)

int greenup_shim_MPI_Raccumulate(const void *obuf, int ocount, MPI_Datatype otype, int target,
                                 MPI_Aint tdisp, int tcount, MPI_Datatype ttype, MPI_Op op,
                                 MPI_Win win, MPI_Request *req)
{
    int strided = 0;
    uint64_t bytes = origin_bytes(ocount, otype, tcount, ttype, &strided);
    POST(bytes, strided, req,
         PMPI_Raccumulate(obuf, ocount, otype, target, tdisp, tcount, ttype, op, win, req));
}

int greenup_shim_MPI_Rget_accumulate(const void *obuf, int ocount, MPI_Datatype otype,
                                     void *rbuf, int rcount, MPI_Datatype rtype, int target,
                                     MPI_Aint tdisp, int tcount, MPI_Datatype ttype, MPI_Op op,
                                     MPI_Win win, MPI_Request *req)
{
    int strided = 0;
    uint64_t bytes = max_u64(bytes_of(rcount, rtype, &strided),
                             op == MPI_NO_OP ? 0 : bytes_of(ocount, otype, &strided));
    (void)bytes_of(tcount, ttype, &strided);
    POST(bytes, strided, req,
         PMPI_Rget_accumulate(obuf, ocount, otype, rbuf, rcount, rtype, target, tdisp, tcount,
                              ttype, op, win, req));
}

/* ---- windows: where block mode may own a fence ----
 *
 * MPI has no nonblocking fence, and a blocking one spins in the MPI until the last rank
 * arrives. So, in block mode, each window the shim sees created gets a duplicate of its
 * communicator (a new communicator over the same group), cached on the window as an attribute, and a fence first waits for every
 * rank of the window in a nonblocking barrier on that duplicate (tested with back-off),
 * then calls the real fence, which then finds everyone there. A barrier before a fence
 * adds synchronization, never removes any, whatever the assertions say; and only fences
 * on that window use the duplicate, so its barriers match fence by fence. Every rank
 * must take the same path at every fence: the duplicate is made only when all ranks of
 * the window could cache it (checked collectively at creation), so a window either has
 * it on every rank or on none. Windows the shim did not see created (by a library
 * through PMPI_, or through the Fortran bindings) have none: their fences are the MPI's
 * own. The attribute's delete callback frees the duplicate at MPI_Win_free, however the
 * window is freed. */
static int fence_keyval = MPI_KEYVAL_INVALID;
static pthread_once_t fence_once = PTHREAD_ONCE_INIT;

static int no_copy(MPI_Win win, int keyval, void *extra, void *in, void *out, int *flag)
{
    (void)win, (void)keyval, (void)extra, (void)in, (void)out;
    *flag = 0;
    return MPI_SUCCESS;
}

/* The duplicates alive in this process, and their limit. Each takes a communicator ID,
 * which an MPI has a limited number of (Open MPI's ob1 carries 16 bits of it), and each
 * window already takes one inside the MPI: a program with thousands of windows must not
 * run out because of greenup. Windows beyond the limit keep the MPI's own fence. */
static int live_dups;
#define MAX_DUPS 1024

static int free_dup(MPI_Win win, int keyval, void *value, void *extra)
{
    MPI_Comm *dup = value;
    (void)win, (void)keyval, (void)extra;
    (void)PMPI_Comm_free(dup);
    free(dup);
    __atomic_sub_fetch(&live_dups, 1, __ATOMIC_RELAXED);
    return MPI_SUCCESS;
}

static void make_keyval(void)
{
    if (PMPI_Win_create_keyval(no_copy, free_dup, &fence_keyval, NULL) != MPI_SUCCESS)
        fence_keyval = MPI_KEYVAL_INVALID;
}

/* After a window was created on `comm` (collective: every rank of it is here). */
static void remember_window(MPI_Comm comm, MPI_Win win)
{
    MPI_Comm dup = MPI_COMM_NULL;
    MPI_Comm *cell;
    MPI_Group group;
    int ok, room, cached = 0;
    if (!greenup_fence_blocks())
        return;
    (void)pthread_once(&fence_once, make_keyval);
    /* First, on the window's communicator (every rank of it is in this window's
     * creation, at the same point of its collective calls), whether every rank can
     * take one more duplicate; a communicator that cannot be made is an MPI error. */
    room = __atomic_add_fetch(&live_dups, 1, __ATOMIC_RELAXED) <= MAX_DUPS;
    cell = malloc(sizeof *cell);
    ok = room && fence_keyval != MPI_KEYVAL_INVALID && cell != NULL;
    if (PMPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS)
        ok = 0;
    /* MPI_Comm_create over the whole group rather than MPI_Comm_dup, which would call
     * the program's attribute copy callbacks on its communicator. */
    if (ok && PMPI_Comm_group(comm, &group) == MPI_SUCCESS) {
        ok = PMPI_Comm_create(comm, group, &dup) == MPI_SUCCESS && dup != MPI_COMM_NULL;
        (void)PMPI_Group_free(&group);
    } else {
        ok = 0;
    }
    if (!ok) {
        __atomic_sub_fetch(&live_dups, 1, __ATOMIC_RELAXED);
        free(cell);
        return;
    }
    *cell = dup;
    ok = cached = PMPI_Win_set_attr(win, fence_keyval, cell) == MPI_SUCCESS;
    /* Then, on the duplicate, whether every rank cached it. */
    if (PMPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, dup) != MPI_SUCCESS)
        ok = 0;
    if (ok)
        return;
    if (cached) {
        (void)PMPI_Win_delete_attr(win, fence_keyval); /* frees dup and cell */
    } else {
        (void)PMPI_Comm_free(&dup);
        free(cell);
        __atomic_sub_fetch(&live_dups, 1, __ATOMIC_RELAXED);
    }
}

/* Wait, testing with back-off, until every rank of `win` has reached its fence; at once
 * when the window has no duplicate. */
static int fence_arrive(MPI_Win win, struct greenup_call *c)
{
    void *value = NULL;
    int found = 0, rc;
    MPI_Request req;
    if (fence_keyval == MPI_KEYVAL_INVALID ||
        PMPI_Win_get_attr(win, fence_keyval, &value, &found) != MPI_SUCCESS || !found || !value)
        return MPI_SUCCESS;
    rc = PMPI_Ibarrier(*(MPI_Comm *)value, &req);
    return rc == MPI_SUCCESS ? wait_one(&req, MPI_STATUS_IGNORE, c) : rc;
}

/* Window creation: not counted (it moves nothing). */
#define CREATED(comm, win, call)                                                          \
    do {                                                                                  \
        int rc_ = (call);                                                                 \
        if (rc_ == MPI_SUCCESS)                                                           \
            remember_window((comm), *(win));                                              \
        return rc_;                                                                       \
    } while (0)

int greenup_shim_MPI_Win_create(void *base, MPI_Aint size, int unit, MPI_Info info,
                                MPI_Comm comm, MPI_Win *win)
{
    CREATED(comm, win, PMPI_Win_create(base, size, unit, info, comm, win));
}

int greenup_shim_MPI_Win_allocate(MPI_Aint size, int unit, MPI_Info info, MPI_Comm comm,
                                  void *base, MPI_Win *win)
{
    CREATED(comm, win, PMPI_Win_allocate(size, unit, info, comm, base, win));
}

int greenup_shim_MPI_Win_allocate_shared(MPI_Aint size, int unit, MPI_Info info, MPI_Comm comm,
                                         void *base, MPI_Win *win)
{
    CREATED(comm, win, PMPI_Win_allocate_shared(size, unit, info, comm, base, win));
}

int greenup_shim_MPI_Win_create_dynamic(MPI_Info info, MPI_Comm comm, MPI_Win *win)
{
    CREATED(comm, win, PMPI_Win_create_dynamic(info, comm, win));
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

int greenup_shim_MPI_Win_fence(int assert, MPI_Win win)
{
    struct greenup_call c;
    int rc;
    greenup_enter_sync(&c);
    rc = fence_arrive(win, &c);
    if (rc == MPI_SUCCESS)
        rc = PMPI_Win_fence(assert, win);
    greenup_leave(&c);
    return rc;
}

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
/* MPI_Win_test, once it says the exposure epoch is over, has done what MPI_Win_wait does
 * (MPI 4.0, 12.5.2), so greenup can own this wait like a point-to-point one. */
int greenup_shim_MPI_Win_wait(MPI_Win win)
{
    int done = 0, rc;
    WAIT(rc, greenup_enter_sync(&c_), PMPI_Win_test(win, &done), done, PMPI_Win_wait(win));
    return rc;
}
int greenup_shim_MPI_Win_complete(MPI_Win win) { SYNC(PMPI_Win_complete(win)); }

/* ---- Fortran ----
 *
 * Open MPI's Fortran bindings never pass through the C wrappers above: `mpif.h` and
 * `use mpi` calls reach mpi_send_ (= ompi_send_f), and `use mpi_f08` calls reach
 * mpi_send_f08_, which calls ompi_send_f; either calls PMPI_Send. greenup wraps both
 * names of each call and forwards each to its own profiling entry point (pmpi_send_,
 * pmpi_send_f08_), which does not come back through any wrapper: no call is counted
 * twice. Both take the same arguments by reference (an f08 handle is a struct holding
 * the Fortran integer), except that an f08 `ierror` is optional and may be null. The
 * byte threshold and the request table apply; waiting stays the MPI's own, except that
 * a fence on a window created in C meets the same barrier as the C fence. */

typedef MPI_Fint F;
#define FDECL(name, ...) extern void name(__VA_ARGS__) __attribute__((weak))
#define FDECL2(base, ...)                                                                 \
    FDECL(pmpi_##base##_, __VA_ARGS__);                                                   \
    FDECL(pmpi_##base##_f08_, __VA_ARGS__)
#define FDECL3(base, ...)                                                                 \
    FDECL2(base, __VA_ARGS__);                                                            \
    FDECL(pmpi_##base##_f08ts_, __VA_ARGS__)
FDECL2(init, F *);
FDECL2(init_thread, F *, F *, F *);
FDECL2(finalize, F *);
FDECL3(send, void *, F *, F *, F *, F *, F *, F *);
FDECL3(recv, void *, F *, F *, F *, F *, F *, F *, F *);
FDECL3(sendrecv, void *, F *, F *, F *, F *, void *, F *, F *, F *, F *, F *, F *, F *);
FDECL3(isend, void *, F *, F *, F *, F *, F *, F *, F *);
FDECL3(irecv, void *, F *, F *, F *, F *, F *, F *, F *);
FDECL2(wait, F *, F *, F *);
FDECL2(waitall, F *, F *, F *, F *);
FDECL2(waitany, F *, F *, F *, F *, F *);
FDECL2(waitsome, F *, F *, F *, F *, F *, F *);
FDECL2(test, F *, F *, F *, F *);
FDECL2(testall, F *, F *, F *, F *, F *);
FDECL2(testany, F *, F *, F *, F *, F *, F *);
FDECL2(testsome, F *, F *, F *, F *, F *, F *);
FDECL2(request_free, F *, F *);
FDECL2(win_wait, F *, F *);
FDECL2(win_complete, F *, F *);
FDECL2(barrier, F *, F *);
FDECL3(bcast, void *, F *, F *, F *, F *, F *);
FDECL3(reduce, void *, void *, F *, F *, F *, F *, F *, F *);
FDECL3(allreduce, void *, void *, F *, F *, F *, F *, F *);
FDECL3(alltoall, void *, F *, F *, void *, F *, F *, F *, F *);
FDECL3(allgather, void *, F *, F *, void *, F *, F *, F *, F *);
FDECL3(put, void *, F *, F *, F *, MPI_Aint *, F *, F *, F *, F *);
FDECL3(get, void *, F *, F *, F *, MPI_Aint *, F *, F *, F *, F *);
FDECL3(accumulate, void *, F *, F *, F *, MPI_Aint *, F *, F *, F *, F *, F *);
FDECL3(rput, void *, F *, F *, F *, MPI_Aint *, F *, F *, F *, F *, F *);
FDECL3(rget, void *, F *, F *, F *, MPI_Aint *, F *, F *, F *, F *, F *);
FDECL2(win_fence, F *, F *, F *);
FDECL2(win_flush, F *, F *, F *);
FDECL2(win_unlock, F *, F *, F *);
FDECL2(win_unlock_all, F *, F *);

/* Define greenup_shim_mpi_BASE_ (mpif.h, `use mpi`) and greenup_shim_mpi_BASE_f08_ with
 * the same parameters (the last named `ierr`) and body. In the body, FFWD(args) calls
 * the matching pmpi_ entry point with `args` and the error in `e`. An MPI without that
 * profiling name (another MPI, another version) gets the call passed to its own
 * mpi_ entry point unchanged (counted, never counted twice: it does not come back
 * here); only when it has neither does `e` stay MPI_ERR_INTERN. `e` goes to `ierr`. */
#define FBOTH(base, params, ...)                                                          \
    void greenup_shim_mpi_##base##_ params                                                \
    {                                                                                     \
        FBODY(pmpi_##base##_, "mpi_" #base "_", __VA_ARGS__)                              \
    }                                                                                     \
    void greenup_shim_mpi_##base##_f08_ params                                            \
    {                                                                                     \
        FBODY(pmpi_##base##_f08_, "mpi_" #base "_f08_", __VA_ARGS__)                      \
    }
/* Open MPI 6's `use mpi_f08` passes a choice buffer as a Fortran 2018 descriptor (TS
 * 29113): each call with one is mpi_BASE_f08ts_, its other arguments as in f08. The
 * descriptor goes through untouched and the counts and types sit where they did, so
 * one body serves all three names. */
#define FALL(base, params, ...)                                                           \
    FBOTH(base, params, __VA_ARGS__)                                                      \
    void greenup_shim_mpi_##base##_f08ts_ params                                          \
    {                                                                                     \
        FBODY(pmpi_##base##_f08ts_, "mpi_" #base "_f08ts_", __VA_ARGS__)                  \
    }
#define FBODY(impl, self, ...)                                                            \
    static __typeof__(impl) *next;                                                        \
    __typeof__(impl) *const fn =                                                          \
        impl ? impl : next ? next : (next = (__typeof__(impl) *)dlsym(RTLD_NEXT, self));  \
    F e = MPI_ERR_INTERN;                                                                 \
    __VA_ARGS__                                                                           \
    if (ierr)                                                                             \
        *ierr = e;
#define FFWD(...)                                                                         \
    do {                                                                                  \
        if (fn)                                                                           \
            fn(__VA_ARGS__, &e);                                                          \
    } while (0)
#define FFWD0()                                                                           \
    do {                                                                                  \
        if (fn)                                                                           \
            fn(&e);                                                                       \
    } while (0)
/* A call moving `bytes`: the byte threshold decides. */
#define FCOUNT(bytes, strided, ...)                                                       \
    do {                                                                                  \
        struct greenup_call c_;                                                           \
        greenup_enter(&c_, (bytes), (strided));                                           \
        FFWD(__VA_ARGS__);                                                                \
        greenup_leave(&c_);                                                               \
    } while (0)
/* A call that waits for nothing (a test, a one-sided transfer): counted, never lowered,
 * no progress for the guard. */
#define FNOWAIT(...)                                                                      \
    do {                                                                                  \
        struct greenup_call c_;                                                           \
        greenup_enter_post(&c_, 0, 0);                                                    \
        FFWD(__VA_ARGS__);                                                                \
        greenup_leave(&c_);                                                               \
    } while (0)
/* A collective on `*comm_`, uncounted where the rank is alone (as COLLECTIVE in C). */
#define FCOLLECTIVE(comm_, bytes, strided, ...)                                           \
    do {                                                                                  \
        if (fothers(comm_) == 0)                                                          \
            FFWD(__VA_ARGS__);                                                            \
        else                                                                              \
            FCOUNT((bytes), (strided), __VA_ARGS__);                                      \
    } while (0)
/* A call posting a transfer of `bytes` with its request in `*req`. */
#define FPOST(bytes, strided, req, ...)                                                   \
    do {                                                                                  \
        struct greenup_call c_;                                                           \
        greenup_enter_post(&c_, (bytes), (strided));                                      \
        FFWD(__VA_ARGS__);                                                                \
        if (e == MPI_SUCCESS && (bytes) > 0)                                              \
            greenup_track(fkey(req), (bytes), (strided));                                 \
        greenup_leave(&c_);                                                               \
    } while (0)
/* A one-sided transfer: counted now, decided at the next synchronization. */
#define FRMA(bytes, strided, ...)                                                         \
    do {                                                                                  \
        greenup_pending((bytes), (strided));                                              \
        FNOWAIT(__VA_ARGS__);                                                             \
    } while (0)
#define FSYNC(...)                                                                        \
    do {                                                                                  \
        struct greenup_call c_;                                                           \
        greenup_enter_sync(&c_);                                                          \
        FFWD(__VA_ARGS__);                                                                \
        greenup_leave(&c_);                                                               \
    } while (0)

static uint64_t fbytes(const F *count, const F *type, int *strided)
{
    return bytes_of((int)*count, MPI_Type_f2c(*type), strided);
}

static int fothers(const F *comm) { return others(MPI_Comm_f2c(*comm)); }

FBOTH(init, (F *ierr), FFWD0(); if (e == MPI_SUCCESS) after_init();)

FBOTH(init_thread, (F *required, F *provided, F *ierr), FFWD(required, provided);
      if (e == MPI_SUCCESS) after_init();)

FBOTH(finalize, (F *ierr), greenup_finalize(); FFWD0();)

FALL(send, (void *buf, F *count, F *type, F *dest, F *tag, F *comm, F *ierr),
      int s = 0; uint64_t b = fbytes(count, type, &s);
      FCOUNT(b, s, buf, count, type, dest, tag, comm);)

FALL(recv, (void *buf, F *count, F *type, F *src, F *tag, F *comm, F *status, F *ierr),
      int s = 0; uint64_t b = fbytes(count, type, &s);
      FCOUNT(b, s, buf, count, type, src, tag, comm, status);)

FALL(sendrecv,
      (void *sbuf, F *scount, F *stype, F *dest, F *stag, void *rbuf, F *rcount, F *rtype,
       F *src, F *rtag, F *comm, F *status, F *ierr),
      int s = 0; uint64_t b = max_u64(fbytes(scount, stype, &s), fbytes(rcount, rtype, &s));
      FCOUNT(b, s, sbuf, scount, stype, dest, stag, rbuf, rcount, rtype, src, rtag, comm,
             status);)

FALL(isend, (void *buf, F *count, F *type, F *dest, F *tag, F *comm, F *req, F *ierr),
      int s = 0; uint64_t b = fbytes(count, type, &s);
      FPOST(b, s, req, buf, count, type, dest, tag, comm, req);)

FALL(irecv, (void *buf, F *count, F *type, F *src, F *tag, F *comm, F *req, F *ierr),
      int s = 0; uint64_t b = fbytes(count, type, &s);
      FPOST(b, s, req, buf, count, type, src, tag, comm, req);)

/* Fortran waits: the table decides, the MPI waits. */
#define FWAITS(any_, n_, reqs_, after_, ...)                                                  \
    do {                                                                                  \
        struct greenup_call c_;                                                           \
        struct keys ks = {0};                                                             \
        keys_f(&ks, (n_), (reqs_));                                                         \
        greenup_enter_wait(&c_, ks.k, ks.n, (any_));                                       \
        FFWD(__VA_ARGS__);                                                                \
        after_;                                                                           \
        greenup_leave(&c_);                                                               \
        keys_end(&ks);                                                                    \
    } while (0)

FBOTH(wait, (F *req, F *status, F *ierr), FWAITS(0, 1, req, (void)0, req, status);)

FBOTH(waitall, (F *n, F *reqs, F *statuses, F *ierr),
      FWAITS(0, *n, reqs, (void)0, n, reqs, statuses);)

FBOTH(waitany, (F *n, F *reqs, F *index, F *status, F *ierr),
      FWAITS(1, *n, reqs, if (e == MPI_SUCCESS) forget_some(&ks, 1, index, 1), n, reqs,
             index, status);)

FBOTH(waitsome, (F *n, F *reqs, F *outcount, F *indices, F *statuses, F *ierr),
      FWAITS(1, *n, reqs,
             if (e == MPI_SUCCESS || e == MPI_ERR_IN_STATUS)
                 forget_some(&ks, *outcount, indices, 1),
             n, reqs, outcount, indices, statuses);)

FBOTH(test, (F *req, F *flag, F *status, F *ierr),
      uint64_t key = greenup_tracking() ? fkey(req) : 0;
      FNOWAIT(req, flag, status);
      if (e == MPI_SUCCESS && *flag && key) greenup_forget(key);)

/* Fortran tests on arrays: counted; `forget` removes what they completed. */
#define FTESTS(n_, reqs_, forget_, ...)                                                   \
    do {                                                                                  \
        struct keys ks = {0};                                                             \
        keys_f(&ks, (n_), (reqs_));                                                       \
        FNOWAIT(__VA_ARGS__);                                                             \
        forget_;                                                                          \
        keys_end(&ks);                                                                    \
    } while (0)

FBOTH(testall, (F *n, F *reqs, F *flag, F *statuses, F *ierr),
      FTESTS(*n, reqs, if (e == MPI_SUCCESS && *flag) forget_all(&ks), n, reqs, flag,
             statuses);)

FBOTH(testany, (F *n, F *reqs, F *index, F *flag, F *status, F *ierr),
      FTESTS(*n, reqs, if (e == MPI_SUCCESS && *flag) forget_some(&ks, 1, index, 1), n, reqs,
             index, flag, status);)

FBOTH(testsome, (F *n, F *reqs, F *outcount, F *indices, F *statuses, F *ierr),
      FTESTS(*n, reqs,
             if (e == MPI_SUCCESS || e == MPI_ERR_IN_STATUS)
                 forget_some(&ks, *outcount, indices, 1),
             n, reqs, outcount, indices, statuses);)

/* Not counted, as in C. */
FBOTH(request_free, (F *req, F *ierr), uint64_t key = greenup_tracking() ? fkey(req) : 0;
      FFWD(req); if (key) greenup_forget(key);)

FBOTH(barrier, (F *comm, F *ierr), FCOLLECTIVE(comm, 0, 0, comm);)

FALL(bcast, (void *buf, F *count, F *type, F *root, F *comm, F *ierr),
      int s = 0; uint64_t b = fbytes(count, type, &s);
      FCOLLECTIVE(comm, b, s, buf, count, type, root, comm);)

FALL(reduce, (void *sbuf, void *rbuf, F *count, F *type, F *op, F *root, F *comm, F *ierr),
      int s = 0; uint64_t b = fbytes(count, type, &s);
      FCOLLECTIVE(comm, b, s, sbuf, rbuf, count, type, op, root, comm);)

FALL(allreduce, (void *sbuf, void *rbuf, F *count, F *type, F *op, F *comm, F *ierr),
      int s = 0; uint64_t b = fbytes(count, type, &s);
      FCOLLECTIVE(comm, b, s, sbuf, rbuf, count, type, op, comm);)

FALL(alltoall,
      (void *sbuf, F *scount, F *stype, void *rbuf, F *rcount, F *rtype, F *comm, F *ierr),
      int s = 0; uint64_t b = (uint64_t)fothers(comm) * fbytes(rcount, rtype, &s);
      FCOLLECTIVE(comm, b, s, sbuf, scount, stype, rbuf, rcount, rtype, comm);)

FALL(allgather,
      (void *sbuf, F *scount, F *stype, void *rbuf, F *rcount, F *rtype, F *comm, F *ierr),
      int s = 0; uint64_t b = (uint64_t)fothers(comm) * fbytes(rcount, rtype, &s);
      FCOLLECTIVE(comm, b, s, sbuf, scount, stype, rbuf, rcount, rtype, comm);)

FALL(put,
      (void *obuf, F *ocount, F *otype, F *target, MPI_Aint *tdisp, F *tcount, F *ttype,
       F *win, F *ierr),
      int s = 0; uint64_t b = fbytes(ocount, otype, &s);
      FRMA(b, s, obuf, ocount, otype, target, tdisp, tcount, ttype, win);)

FALL(get,
      (void *obuf, F *ocount, F *otype, F *target, MPI_Aint *tdisp, F *tcount, F *ttype,
       F *win, F *ierr),
      int s = 0; uint64_t b = fbytes(ocount, otype, &s);
      FRMA(b, s, obuf, ocount, otype, target, tdisp, tcount, ttype, win);)

FALL(accumulate,
      (void *obuf, F *ocount, F *otype, F *target, MPI_Aint *tdisp, F *tcount, F *ttype,
       F *op, F *win, F *ierr),
      int s = 0; uint64_t b = fbytes(ocount, otype, &s);
      FRMA(b, s, obuf, ocount, otype, target, tdisp, tcount, ttype, op, win);)

FALL(rput,
      (void *obuf, F *ocount, F *otype, F *target, MPI_Aint *tdisp, F *tcount, F *ttype,
       F *win, F *req, F *ierr),
      int s = 0; uint64_t b = fbytes(ocount, otype, &s);
      FPOST(b, s, req, obuf, ocount, otype, target, tdisp, tcount, ttype, win, req);)

FALL(rget,
      (void *obuf, F *ocount, F *otype, F *target, MPI_Aint *tdisp, F *tcount, F *ttype,
       F *win, F *req, F *ierr),
      int s = 0; uint64_t b = fbytes(ocount, otype, &s);
      FPOST(b, s, req, obuf, ocount, otype, target, tdisp, tcount, ttype, win, req);)

FBOTH(win_fence, (F *assert, F *win, F *ierr),
      struct greenup_call c_; greenup_enter_sync(&c_);
      e = fence_arrive(MPI_Win_f2c(*win), &c_);
      if (e == MPI_SUCCESS) {
          e = MPI_ERR_INTERN;
          FFWD(assert, win);
      } greenup_leave(&c_);)

FBOTH(win_flush, (F *rank, F *win, F *ierr), FSYNC(rank, win);)

FBOTH(win_unlock, (F *rank, F *win, F *ierr), FSYNC(rank, win);)

FBOTH(win_unlock_all, (F *win, F *ierr), FSYNC(win);)

FBOTH(win_wait, (F *win, F *ierr), FSYNC(win);)

FBOTH(win_complete, (F *win, F *ierr), FSYNC(win);)
