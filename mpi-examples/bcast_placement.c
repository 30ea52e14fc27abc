/* bcast_placement.c: does the MPI library's broadcast run at another speed depending on which
 * ranks share a CPU?
 *
 * A plain MPI program (no treecast): CALLS broadcasts of BYTES from rank 0 (default 1 MiB), each
 * after a barrier, of written data; each rank reads its time in the call and the CPU it finished
 * it on (sched_getcpu). Rank 0 prints, per block of BLOCK calls, the median over calls of the
 * median rank's time in the call and the groupings of ranks that shared a CPU in those calls
 * with how many calls had each ("1+2=150": ranks 1 and 2 on one CPU in 150 calls; "none": no two
 * ranks on one). Where ranks outnumber cores the scheduler picks the grouping, and a block's
 * time follows it (3 Open MPI ranks on the 2-core VM, 1 MiB: 103 us with the root sharing a core
 * with a leaf, 162 us with the two leaves sharing one); treecast's profiles record the same
 * (`profile::placement`).
 *
 *   mpicc -O2 mpi-examples/bcast_placement.c -o /tmp/bcast_placement
 *   mpirun -np 3 --oversubscribe /tmp/bcast_placement [BYTES=1048576] [CALLS=1500] [BLOCK=150]
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median of v[0..n) (sorts v). */
static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof(double), cmp);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The grouping of `n` ranks whose CPUs are `cpu[0..n)` as text: the ranks sharing each CPU
 * joined by '+', groups by a space; "none" when no two share one (or a CPU is unknown). */
static void grouping(const int *cpu, int n, char *out, size_t len) {
    out[0] = '\0';
    for (int r = 0; r < n; r++) {
        if (cpu[r] < 0) {
            snprintf(out, len, "none");
            return;
        }
    }
    for (int r = 0; r < n; r++) {
        int first = 1, others = 0;
        for (int q = 0; q < r; q++) first &= cpu[q] != cpu[r];
        for (int q = r + 1; q < n; q++) others |= cpu[q] == cpu[r];
        if (!first || !others) continue;
        size_t at = strlen(out);
        snprintf(out + at, len - at, "%s%d", at ? " " : "", r);
        for (int q = r + 1; q < n; q++) {
            if (cpu[q] == cpu[r]) {
                at = strlen(out);
                snprintf(out + at, len - at, "+%d", q);
            }
        }
    }
    if (!out[0]) snprintf(out, len, "none");
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    long bytes = argc > 1 ? atol(argv[1]) : 1L << 20;
    int calls = argc > 2 ? atoi(argv[2]) : 1500;
    int block = argc > 3 ? atoi(argv[3]) : 150;
    if (bytes < 1 || calls < 1 || block < 1 || block > calls || n > 64) {
        if (rank == 0)
            fprintf(stderr, "bcast_placement: BYTES, CALLS and BLOCK must be positive, BLOCK at most CALLS, "
                            "and at most 64 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    char *buf = malloc((size_t)bytes);
    double *t = malloc(sizeof(double) * (size_t)calls);
    int *cpu = malloc(sizeof(int) * (size_t)calls);
    if (!buf || !t || !cpu) MPI_Abort(MPI_COMM_WORLD, 3);
    /* Written data: an untouched buffer is the kernel's zero page, which reads faster. */
    for (long i = 0; i < bytes; i++) buf[i] = (char)(i * 31 + rank + 1);
    for (int i = 0; i < calls; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double a = MPI_Wtime();
        MPI_Bcast(buf, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
        t[i] = MPI_Wtime() - a;
        cpu[i] = sched_getcpu();
    }
    double *all_t = NULL;
    int *all_cpu = NULL;
    if (rank == 0) {
        all_t = malloc(sizeof(double) * (size_t)calls * (size_t)n);
        all_cpu = malloc(sizeof(int) * (size_t)calls * (size_t)n);
        if (!all_t || !all_cpu) MPI_Abort(MPI_COMM_WORLD, 3);
    }
    MPI_Gather(t, calls, MPI_DOUBLE, all_t, calls, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    MPI_Gather(cpu, calls, MPI_INT, all_cpu, calls, MPI_INT, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("%d ranks, %ld B, blocks of %d calls: median rank's time (us), groupings of ranks by CPU\n", n,
               bytes, block);
        double *meds = malloc(sizeof(double) * (size_t)block);
        double v[64];
        int c[64];
        char names[64][256];
        int counts[64];
        for (int b = 0; b + block <= calls; b += block) {
            int kinds = 0;
            for (int i = b; i < b + block; i++) {
                for (int k = 0; k < n; k++) {
                    v[k] = all_t[(size_t)k * (size_t)calls + (size_t)i];
                    c[k] = all_cpu[(size_t)k * (size_t)calls + (size_t)i];
                }
                meds[i - b] = median(v, n);
                char g[256];
                grouping(c, n, g, sizeof g);
                int j = 0;
                while (j < kinds && strcmp(names[j], g)) j++;
                if (j == kinds && kinds < 64) {
                    snprintf(names[kinds], sizeof names[kinds], "%s", g);
                    counts[kinds++] = 0;
                }
                if (j < kinds) counts[j]++;
            }
            printf("calls %d-%d: %.1f us;", b, b + block - 1, median(meds, block) * 1e6);
            for (int j = 0; j < kinds; j++) printf(" %s=%d", names[j], counts[j]);
            printf("\n");
        }
        free(meds);
    }
    free(buf);
    free(t);
    free(cpu);
    free(all_t);
    free(all_cpu);
    MPI_Finalize();
    return 0;
}
