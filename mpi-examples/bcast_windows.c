/* bcast_windows.c: how steady is the MPI library's own broadcast on this machine?
 *
 * A plain MPI program (no treecast): per size (1 KiB, 4 KiB, ... 16 MiB), WINDOWS windows of
 * CALLS broadcasts from rank 0 (fewer for large sizes, so that a window moves at most 64 MiB),
 * each call after a barrier, as `predict_bench` makes them, of written data. It prints per size
 * each window's median over calls of the median rank's time in the call, and the spread (the
 * slowest window's median over the fastest's). A spread above 1.25x is a change in the
 * library's own speed within one job that no prediction made before the calls can follow within
 * issue 23's 25%: set-up timings see one window, the job's calls another.
 *
 *   mpicc -O2 mpi-examples/bcast_windows.c -o /tmp/bcast_windows
 *   mpirun -np 4 --oversubscribe /tmp/bcast_windows [WINDOWS=6] [CALLS=200]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median of v[0..n) (sorts v). */
static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof(double), cmp);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    int windows = argc > 1 ? atoi(argv[1]) : 6;
    int calls = argc > 2 ? atoi(argv[2]) : 200;
    if (windows < 1 || calls < 1) {
        if (rank == 0) fprintf(stderr, "bcast_windows: WINDOWS and CALLS must be positive numbers\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const long largest = 16L << 20;
    /* Written data: an untouched buffer is the kernel's zero page, read from cache. */
    unsigned char *buf = malloc((size_t)largest);
    double *mine = malloc(sizeof(double) * (size_t)calls);
    double *all = malloc(sizeof(double) * (size_t)calls * (size_t)n);
    double *per_call = malloc(sizeof(double) * (size_t)calls);
    double *ranks = malloc(sizeof(double) * (size_t)n);
    double *window = malloc(sizeof(double) * (size_t)windows);
    if (!buf || !mine || !all || !per_call || !ranks || !window) {
        fprintf(stderr, "bcast_windows: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (long i = 0; i < largest; i++) buf[i] = (unsigned char)(i * 31 + rank + 1);
    int moved = 0;
    if (rank == 0)
        printf("%d ranks, MPI_Bcast after a barrier: per window, the median over calls of the median rank's time (us)\n", n);
    for (long bytes = 1024; bytes <= largest; bytes *= 4) {
        int k = calls;
        long cap = (64L << 20) / bytes;
        if (k > cap) k = cap < 4 ? 4 : (int)cap;
        if (k > calls) k = calls; /* the buffers hold CALLS */
        for (int w = 0; w < windows; w++) {
            for (int c = 0; c < k; c++) {
                MPI_Barrier(MPI_COMM_WORLD);
                double t0 = MPI_Wtime();
                MPI_Bcast(buf, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
                mine[c] = MPI_Wtime() - t0;
            }
            MPI_Gather(mine, k, MPI_DOUBLE, all, k, MPI_DOUBLE, 0, MPI_COMM_WORLD);
            if (rank == 0) {
                for (int c = 0; c < k; c++) {
                    for (int r = 0; r < n; r++) ranks[r] = all[(size_t)r * (size_t)k + (size_t)c];
                    per_call[c] = median(ranks, n);
                }
                window[w] = median(per_call, k) * 1e6;
            }
        }
        if (rank == 0) {
            double lo = window[0], hi = window[0];
            printf("%9ld B, %3d calls a window:", bytes, k);
            for (int w = 0; w < windows; w++) {
                printf(window[w] < 1 ? " %.3f" : window[w] < 10 ? " %.2f" : " %.1f", window[w]);
                if (window[w] < lo) lo = window[w];
                if (window[w] > hi) hi = window[w];
            }
            double spread = lo > 0 ? hi / lo : 0;
            printf("; spread %.2fx\n", spread);
            moved += spread > 1.25;
        }
    }
    if (rank == 0) printf("sizes whose windows differ by more than 1.25x: %d of 8\n", moved);
    free(buf);
    free(mine);
    free(all);
    free(per_call);
    free(ranks);
    free(window);
    MPI_Finalize();
    return 0;
}
