/* greenup's entry point for HPL under SMPI.
 *
 * Debian's hpcc source carries HPL 2.0 as a library: its driver is HPL_main, which HPCC's
 * own main calls among its other benchmarks. build.sh compiles HPL's sources (hpl/src
 * and hpl/testing of hpcc's original tarball) with this file, so a run is HPL alone.
 *
 *   hpl INPUT
 *
 * INPUT is an HPL input file (the format of hpcc's _hpccinf.txt). HPL reads
 * ./hpccinf.txt and appends its report to ./hpccoutf.txt, so rank 0 copies INPUT there
 * (greenup-sim runs each job in its own work directory) and prints the report on
 * standard output when HPL is done: its residual line, "... PASSED" or "... FAILED", is
 * the run's verdict, which greenup-sim records. A run whose residual check fails exits 1,
 * so smpirun counts it failed.
 *
 * HPL waits for a panel by polling MPI_Iprobe. SMPI makes each failed probe take time
 * by computing on the rank's host (smpi/iprobe seconds, growing with each failure), and
 * its time-independent trace writes that computation down as the rank's own work. A
 * replay at a lower clock then computes a fast node's waiting again, and longer, though
 * a real node that is slowed only polls less. So build.sh compiles HPL with
 * -DMPI_Iprobe=greenup_iprobe: a failed probe here sleeps POLL_S of simulated time, which
 * the trace does not record, and smpi/iprobe is 0. A polling rank's host is then idle,
 * as it is in a blocking MPI wait, not busy as a real polling core is (the SimGrid
 * README says what this leaves out). */
#undef MPI_Iprobe
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <simgrid/actor.h>
#include <xbt/config.h>

#include "hpl.h"

/* A failed probe sleeps POLL_S times the failures in a row, up to POLL_MAX_S, so a
 * live run wakes at most POLL_MAX_S after the message it waits for has arrived. SMPI
 * counts each stretch of HPL's code between two probes as computation once it passes
 * smpi/cpu-threshold (1 us), and its own timers take about that, so every poll adds a
 * microsecond of "work" to the trace: the growing sleep keeps a long wait to a few
 * hundred polls. */
#define POLL_S 1e-5
#define POLL_MAX_S 1e-4

/* Failed probes in a row; each rank has its own (SMPI privatizes globals). */
static int failures;

int greenup_iprobe(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status);

/* MPI_Iprobe, for HPL's sources: a failed probe sleeps, untraced, with the rank's CPU
 * timing paused, so neither the sleep nor the simulator's work in it counts as HPL's. */
int greenup_iprobe(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status)
{
  int rc = MPI_Iprobe(source, tag, comm, flag, status);
  if (rc != MPI_SUCCESS || *flag) {
    failures = 0;
    return rc;
  }
  if (failures * POLL_S < POLL_MAX_S)
    failures++;
  smpi_bench_end();
  sg_actor_sleep_for(failures * POLL_S);
  smpi_bench_begin();
  return rc;
}

int HPL_main(int argc, char **argv, HPL_RuntimeData *rdata, int *failure);

/* HPL_pdinfo calls this only when ./hpccinf.txt is missing or does not parse (HPCC then
 * sizes the problem from the node's memory). A run here must be the one its input says,
 * so it stops with one line instead. */
int HPCC_Defaults(HPL_T_test *TEST, int *NS, int *N, int *NBS, int *NB, HPL_T_ORDER *PMAPPIN,
                  int *NPQS, int *P, int *Q, int *NPFS, HPL_T_FACT *PF, int *NBMS, int *NBM,
                  int *NDVS, int *NDV, int *NRFS, HPL_T_FACT *RF, int *NTPS, HPL_T_TOP *TP,
                  int *NDHS, int *DH, HPL_T_SWAP *FSWAP, int *TSWAP, int *L1NOTRAN,
                  int *UNOTRAN, int *EQUIL, int *ALIGN, MPI_Comm comm)
{
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  if (rank == 0)
    fprintf(stderr, "hpl: hpccinf.txt is not HPL input (HPL's format, as hpcc's _hpccinf.txt)\n");
  MPI_Abort(comm, 2);
  return 1;
}

/* Copy `from` to `to`; 0 on success, else one line on stderr. */
static int copy(const char *from, const char *to)
{
  char buf[4096];
  size_t n;
  int bad = 0;
  FILE *in = fopen(from, "r");
  FILE *out;
  if (in == NULL) {
    perror(from);
    return 1;
  }
  out = fopen(to, "w");
  if (out == NULL) {
    perror(to);
    fclose(in);
    return 1;
  }
  while ((n = fread(buf, 1, sizeof buf, in)) > 0)
    if (fwrite(buf, 1, n, out) != n) {
      perror(to);
      bad = 1;
      break;
    }
  fclose(in);
  if (fclose(out) != 0)
    bad = 1;
  return bad;
}

int main(int argc, char **argv)
{
  HPL_RuntimeData rdata;
  int failure = 0, rank = 0, bad = 0;
  memset(&rdata, 0, sizeof rdata);
  /* Every rank sets it, before its first probe; greenup_iprobe waits instead. */
  sg_cfg_set_double("smpi/iprobe", 0.0);
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) {
    if (argc != 2) {
      fprintf(stderr, "usage: %s INPUT (an HPL input file)\n", argv[0]);
      bad = 1;
    } else {
      /* A report left by an earlier run in this directory is not this run's. */
      unlink("hpccoutf.txt");
      bad = copy(argv[1], "hpccinf.txt");
    }
  }
  MPI_Bcast(&bad, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (bad) {
    MPI_Finalize();
    return 2;
  }
  HPL_main(argc, argv, &rdata, &failure);
  /* Only rank 0 counts the checks. */
  MPI_Bcast(&failure, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    FILE *report = fopen("hpccoutf.txt", "r");
    char line[1024];
    if (report != NULL) {
      while (fgets(line, sizeof line, report) != NULL)
        fputs(line, stdout);
      fclose(report);
    }
    fflush(stdout);
  }
  MPI_Finalize();
  return failure ? 1 : 0;
}
