/*
 * A plain MPI program that broadcasts as applications do, for looking at its profile: 300
 * iterations, each a broadcast from rank 0 of data it has just written (1000, 8000, 64000 and
 * 512000 bytes in turn), some computation (rank 2 does eight times the others' share, so it
 * arrives late), and a 100-byte broadcast from every rank in turn.
 *
 *   mpicc -O2 mpi-examples/mixed_sizes.c -o mixed_sizes
 *   mpirun -np 4 --oversubscribe -x LD_PRELOAD=$PWD/target/release/libtreecast_preload.so \
 *       -x TREECAST_PROFILE=p.json ./mixed_sizes
 *   target/release/treecast report p.json
 *
 * Every rank checks each broadcast's data; rank 0 prints "CHECK OK mixed sizes" when all were
 * right (tests/preload.rs runs it plainly and under the interposer).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void work(int rank, int it) {
    volatile double x = 0;
    long n = (rank == 2 ? 400000 : 50000) * (1 + it % 3);
    for (long i = 0; i < n; i++) x += i * 0.5;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    char *buf = malloc(512000);
    int bad = 0;
    for (int it = 0; it < 300; it++) {
        int n = 1000 << (it % 4) * 3; /* 1000, 8000, 64000, 512000 */
        if (rank == 0) memset(buf, it, (size_t)n);
        MPI_Bcast(buf, n, MPI_BYTE, 0, MPI_COMM_WORLD);
        if (buf[n - 1] != (char)it) bad = 1;
        work(rank, it);
        MPI_Bcast(buf, 100, MPI_BYTE, it % size, MPI_COMM_WORLD);
    }
    int any_bad = 0;
    MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (bad) fprintf(stderr, "rank %d: wrong data\n", rank);
    if (rank == 0 && !any_bad) printf("CHECK OK mixed sizes\n");
    free(buf);
    MPI_Finalize();
    return bad;
}
