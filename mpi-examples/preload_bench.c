/*
 * A plain MPI program (it knows nothing of treecast) timing broadcasts called as MPI_Bcast and
 * as PMPI_Bcast, side by side within one run. Under LD_PRELOAD=libtreecast_preload.so,
 * MPI_Bcast goes through the interposer while PMPI_Bcast never does, so their ratio is the
 * interposer's cost measured in the same processes; without the preload both are the same
 * function and the ratio shows the noise floor.
 * Driven by `cargo run --release -p treecast-preload --example bench_preload`.
 *
 *   mpicc -O2 mpi-examples/preload_bench.c -o preload_bench
 *   mpirun -np 2 ./preload_bench [rounds] [calls per batch] [bytes[,bytes..]] [loop|barrier]
 *
 * Several sizes (at most 8, comma-separated) are broadcast in turn, one call of each, as a
 * program mixes sizes: both kinds make the same calls.
 *
 * loop (the default): batches of back-to-back calls of one kind, the kinds alternating (which
 * goes first flips every round); a batch's time per call is the slowest rank's.
 * barrier: every call after its own barrier and timed alone (rounds x calls of each kind, the
 * order flipping every iteration); an iteration's time is the slowest rank's.
 *
 * Prints one line: "mpi_bcast_median_us=X pmpi_bcast_median_us=Y ratio=X/Y paired_ratio=Z",
 * where Z is the median over rounds (iterations) of each one's MPI_Bcast / PMPI_Bcast time: a
 * pair shares the machine's phase, so Z is steadier than the ratio of the medians.
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

static void bcast(int use_pmpi, void *buf, int bytes) {
    if (use_pmpi)
        PMPI_Bcast(buf, bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
    else
        MPI_Bcast(buf, bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
}

/* The sizes broadcast in turn. */
static int sizes[8], nsizes;

/* Seconds per call of one batch, the slowest rank's. */
static double batch(int use_pmpi, int calls, void *buf) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    if (use_pmpi)
        for (int i = 0; i < calls; i++) PMPI_Bcast(buf, sizes[i % nsizes], MPI_BYTE, 0, MPI_COMM_WORLD);
    else
        for (int i = 0; i < calls; i++) MPI_Bcast(buf, sizes[i % nsizes], MPI_BYTE, 0, MPI_COMM_WORLD);
    double mine = (MPI_Wtime() - t0) / calls, slowest;
    MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return slowest;
}

/* One call after a barrier, this rank's time. */
static double one(int use_pmpi, void *buf, int bytes) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    bcast(use_pmpi, buf, bytes);
    return MPI_Wtime() - t0;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rounds = argc > 1 ? atoi(argv[1]) : 41;
    int calls = argc > 2 ? atoi(argv[2]) : 2000;
    int bytes = 0, bad = 0;
    for (char *p = argc > 3 ? argv[3] : "1024"; *p && !bad; nsizes++) {
        char *end;
        long b = strtol(p, &end, 10);
        bad = end == p || b < 0 || b > 1 << 30 || nsizes == 8 || (*end && *end != ',');
        sizes[nsizes < 8 ? nsizes : 7] = (int)b;
        if (b > bytes) bytes = (int)b;
        p = *end ? end + 1 : end;
    }
    int barrier_mode = argc > 4 && strcmp(argv[4], "barrier") == 0;
    if (rounds < 1 || calls < 1 || bad || nsizes == 0 || (argc > 4 && !barrier_mode && strcmp(argv[4], "loop") != 0))
        MPI_Abort(MPI_COMM_WORLD, 2);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    char *buf = malloc((size_t)bytes + 1);
    memset(buf, rank, (size_t)bytes + 1);
    int n = barrier_mode ? rounds * calls : rounds;
    double *mpi = malloc(sizeof(double) * (size_t)n), *pmpi = malloc(sizeof(double) * (size_t)n);
    double *ratio = malloc(sizeof(double) * (size_t)n);
    batch(0, calls, buf); /* warm-up: connections, treecast's set-up, plans and routes */
    batch(1, calls, buf);
    for (int r = 0; r < n; r++) {
        /* Alternate which variant goes first, so drift affects both alike. */
        int pmpi_first = r % 2 == 0;
        if (barrier_mode) {
            int b_r = sizes[r % nsizes];
            double a = one(pmpi_first, buf, b_r), b = one(!pmpi_first, buf, b_r);
            pmpi[r] = pmpi_first ? a : b;
            mpi[r] = pmpi_first ? b : a;
        } else if (pmpi_first) {
            pmpi[r] = batch(1, calls, buf);
            mpi[r] = batch(0, calls, buf);
        } else {
            mpi[r] = batch(0, calls, buf);
            pmpi[r] = batch(1, calls, buf);
        }
    }
    if (barrier_mode) { /* each iteration's slowest rank */
        MPI_Allreduce(MPI_IN_PLACE, mpi, n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        MPI_Allreduce(MPI_IN_PLACE, pmpi, n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    }
    int k = 0;
    for (int r = 0; r < n; r++)
        if (pmpi[r] > 0) ratio[k++] = mpi[r] / pmpi[r];
    if (rank == 0) {
        double z = k ? median(ratio, k) : 1.0;
        double m = median(mpi, n), p = median(pmpi, n);
        printf("mpi_bcast_median_us=%.4f pmpi_bcast_median_us=%.4f ratio=%.4f paired_ratio=%.4f\n", m * 1e6, p * 1e6,
               m / p, z);
    }
    free(buf);
    free(mpi);
    free(pmpi);
    free(ratio);
    MPI_Finalize();
    return 0;
}
