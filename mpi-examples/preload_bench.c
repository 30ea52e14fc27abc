/*
 * A plain MPI program (it knows nothing of treecast) timing a loop of 1 KiB broadcasts called
 * as MPI_Bcast and as PMPI_Bcast, in alternating batches within one run. Under
 * LD_PRELOAD=libtreecast_preload.so, MPI_Bcast goes through the interposer while PMPI_Bcast
 * never does, so the ratio of the two medians is the interposer's cost measured side by side;
 * without the preload both are the same function and the ratio shows the noise floor.
 * Driven by `cargo run --release -p treecast-preload --example bench_preload`.
 *
 *   mpicc -O2 mpi-examples/preload_bench.c -o preload_bench
 *   mpirun -np 2 ./preload_bench [rounds] [calls per batch] [bytes]
 *
 * Prints one line: "mpi_bcast_median_us=X pmpi_bcast_median_us=Y ratio=X/Y". A batch's time is
 * the slowest rank's; the median is over rounds.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Seconds per call of one batch, the slowest rank's. */
static double batch(int use_pmpi, int calls, void *buf, int bytes) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    if (use_pmpi)
        for (int i = 0; i < calls; i++) PMPI_Bcast(buf, bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
    else
        for (int i = 0; i < calls; i++) MPI_Bcast(buf, bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
    double mine = (MPI_Wtime() - t0) / calls, slowest;
    MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return slowest;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rounds = argc > 1 ? atoi(argv[1]) : 41;
    int calls = argc > 2 ? atoi(argv[2]) : 2000;
    int bytes = argc > 3 ? atoi(argv[3]) : 1024;
    if (rounds < 1 || calls < 1 || bytes < 0) MPI_Abort(MPI_COMM_WORLD, 2);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    char *buf = malloc((size_t)bytes + 1);
    memset(buf, rank, (size_t)bytes + 1);
    double *mpi = malloc(sizeof(double) * (size_t)rounds), *pmpi = malloc(sizeof(double) * (size_t)rounds);
    batch(0, calls, buf, bytes); /* warm-up: connections, treecast's set-up and plans */
    batch(1, calls, buf, bytes);
    for (int r = 0; r < rounds; r++) {
        /* Alternate which variant goes first, so drift affects both alike. */
        if (r % 2) {
            mpi[r] = batch(0, calls, buf, bytes);
            pmpi[r] = batch(1, calls, buf, bytes);
        } else {
            pmpi[r] = batch(1, calls, buf, bytes);
            mpi[r] = batch(0, calls, buf, bytes);
        }
    }
    if (rank == 0) {
        double m = median(mpi, rounds), p = median(pmpi, rounds);
        printf("mpi_bcast_median_us=%.4f pmpi_bcast_median_us=%.4f ratio=%.4f\n", m * 1e6, p * 1e6, m / p);
    }
    free(buf);
    free(mpi);
    free(pmpi);
    MPI_Finalize();
    return 0;
}
