/* Broadcasts under SMPI with the same send order and blocking semantics as SMPI's own
 * smpi/bcast:binomial_tree and flattree, for tests/simgrid_crossval.rs.
 *
 * Usage: bcast binomial|flat ROOT BYTES
 * binomial: relative rank v receives (blocking) from v - lowbit(v), then sends (blocking
 *   MPI_Send, one at a time) to v + mask for mask = highest power of two below lowbit(v) down
 *   to 1, i.e. the child with the largest subtree first.
 * flat: the root posts MPI_Isend to every other rank in rank order and waits for all; the
 *   others receive.
 * Every rank prints "rank RANK TIME" with the simulated time at which it held the data (0 for
 * the root). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (argc != 4) {
    fprintf(stderr, "usage: bcast binomial|flat ROOT BYTES\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  int root = atoi(argv[2]);
  int bytes = atoi(argv[3]);
  char *buf = calloc(bytes > 0 ? bytes : 1, 1);
  double have = 0.0;
  if (strcmp(argv[1], "binomial") == 0) {
    int rel = (rank - root + n) % n;
    int mask = 1;
    while (mask < n) {
      if (rel & mask) {
        MPI_Recv(buf, bytes, MPI_BYTE, (rank - mask + n) % n, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        have = MPI_Wtime();
        break;
      }
      mask <<= 1;
    }
    for (mask >>= 1; mask > 0; mask >>= 1)
      if (rel + mask < n)
        MPI_Send(buf, bytes, MPI_BYTE, (rank + mask) % n, 0, MPI_COMM_WORLD);
  } else if (strcmp(argv[1], "flat") == 0) {
    if (rank != root) {
      MPI_Recv(buf, bytes, MPI_BYTE, root, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      have = MPI_Wtime();
    } else {
      MPI_Request *req = malloc(sizeof(MPI_Request) * n);
      int k = 0;
      for (int i = 0; i < n; i++)
        if (i != root)
          MPI_Isend(buf, bytes, MPI_BYTE, i, 0, MPI_COMM_WORLD, &req[k++]);
      MPI_Waitall(k, req, MPI_STATUSES_IGNORE);
    }
  } else {
    fprintf(stderr, "unknown algorithm %s\n", argv[1]);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  printf("rank %d %.12e\n", rank, have);
  fflush(stdout);
  MPI_Finalize();
  return 0;
}
