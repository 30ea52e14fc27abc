/* Concurrent point-to-point flows under SMPI, for tests/simgrid_crossval.rs.
 *
 * Usage: flows SRC,DST,BYTES [SRC,DST,BYTES ...]
 * Every flow starts at time 0: each rank posts the receives addressed to it and the sends it
 * owns, then waits for them one at a time. For every flow it receives, a rank prints
 * "flow INDEX TIME" with the simulated time at which the last byte arrived. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int nflows = argc - 1;
  MPI_Request *req = malloc(sizeof(MPI_Request) * (2 * nflows + 1));
  int *which = malloc(sizeof(int) * (2 * nflows + 1));
  int nreq = 0;
  for (int i = 0; i < nflows; i++) {
    int src, dst;
    long bytes;
    if (sscanf(argv[i + 1], "%d,%d,%ld", &src, &dst, &bytes) != 3) {
      fprintf(stderr, "bad flow '%s'\n", argv[i + 1]);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (dst == rank) {
      char *buf = malloc(bytes > 0 ? bytes : 1);
      MPI_Irecv(buf, (int)bytes, MPI_BYTE, src, i, MPI_COMM_WORLD, &req[nreq]);
      which[nreq++] = i;
    }
    if (src == rank) {
      char *buf = calloc(bytes > 0 ? bytes : 1, 1);
      MPI_Isend(buf, (int)bytes, MPI_BYTE, dst, i, MPI_COMM_WORLD, &req[nreq]);
      which[nreq++] = -1;
    }
  }
  for (int k = 0; k < nreq; k++) {
    int idx;
    MPI_Waitany(nreq, req, &idx, MPI_STATUS_IGNORE);
    double t = MPI_Wtime();
    if (which[idx] >= 0)
      printf("flow %d %.12e\n", which[idx], t);
  }
  fflush(stdout);
  MPI_Finalize();
  return 0;
}
