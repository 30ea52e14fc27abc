/*
 * A plain MPI program (it knows nothing of treecast) for the LD_PRELOAD interposer under
 * MPI_THREAD_MULTIPLE: NTHREADS threads broadcast concurrently, each on its own duplicate of
 * MPI_COMM_WORLD, while the main thread broadcasts on MPI_COMM_WORLD itself. Every broadcast is
 * checked byte for byte. Half of the threads free their communicator (concurrently); the others
 * leave theirs to MPI_Finalize.
 *
 *   mpicc -O2 -pthread mpi-examples/preload_threads.c -o preload_threads
 *   mpirun -np 4 ./preload_threads
 *
 * Per communicator: ITERS broadcasts from one call site (a profile must count exactly that).
 * Prints "CHECK OK ..." when every rank verified every broadcast.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>

/* Keep a function that calls MPI_Bcast one call site in the binary: not inlined, and not
 * cloned by GCC's interprocedural optimizations (e.g. one specialized copy per constant
 * argument), so a profile's per-site counts are the program's. (It must also not end in a
 * tail call to MPI_Bcast: the site is the call's return address, which a tail call replaces
 * with its caller's.) */
#if defined(__GNUC__) && !defined(__clang__)
#define ONE_SITE __attribute__((noipa))
#else
#define ONE_SITE __attribute__((noinline))
#endif

#define NTHREADS 4
#define ITERS 40

static int world_rank, world_size;
static MPI_Comm comms[NTHREADS + 1];
static int failures[NTHREADS + 1];

static const int sizes[] = {1, 100, 4096, 65536 + 3, 1 << 20};
#define NSIZES ((int)(sizeof sizes / sizeof sizes[0]))

static unsigned char pattern(unsigned seed, int i) { return (unsigned char)((i * 2654435761u + seed * 40503u) >> 9); }

/* The one MPI_Bcast call site of this program. */
ONE_SITE static int bcast(void *buf, int n, int root, int k) {
    int rc = MPI_Bcast(buf, n, MPI_BYTE, root, comms[k]);
    if (rc != MPI_SUCCESS) fprintf(stderr, "comm %d rank %d: MPI_Bcast returned %d\n", k, world_rank, rc);
    return rc;
}

/* ITERS broadcasts on comms[k], every one checked. */
static void run(int k) {
    unsigned char *buf = malloc(1 << 20);
    for (int it = 0; it < ITERS; it++) {
        int root = (it + k) % world_size;
        int n = sizes[(it + k) % NSIZES];
        unsigned seed = 1000u * (unsigned)k + (unsigned)it;
        unsigned own = world_rank == root ? seed : 5u + (unsigned)world_rank;
        for (int i = 0; i < n; i++) buf[i] = pattern(own, i);
        if (bcast(buf, n, root, k) != MPI_SUCCESS) {
            failures[k]++;
            continue;
        }
        for (int i = 0; i < n; i++)
            if (buf[i] != pattern(seed, i)) {
                fprintf(stderr, "comm %d iteration %d rank %d: wrong byte %d\n", k, it, world_rank, i);
                failures[k]++;
                break;
            }
    }
    free(buf);
}

static void *thread_main(void *arg) {
    int k = (int)(long)arg;
    run(k);
    if (k % 2 == 0) MPI_Comm_free(&comms[k]);
    return NULL;
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    if (provided < MPI_THREAD_MULTIPLE) {
        if (world_rank == 0) printf("CHECK FAILED preload_threads: MPI provides thread level %d only\n", provided);
        MPI_Finalize();
        return 1;
    }
    for (int k = 0; k < NTHREADS; k++) MPI_Comm_dup(MPI_COMM_WORLD, &comms[k]);
    comms[NTHREADS] = MPI_COMM_WORLD;
    pthread_t threads[NTHREADS];
    for (int k = 0; k < NTHREADS; k++) pthread_create(&threads[k], NULL, thread_main, (void *)(long)k);
    run(NTHREADS); /* the main thread, on MPI_COMM_WORLD */
    for (int k = 0; k < NTHREADS; k++) pthread_join(threads[k], NULL);

    int mine = 0, total = 0;
    for (int k = 0; k <= NTHREADS; k++) mine += failures[k];
    MPI_Allreduce(&mine, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (world_rank == 0) {
        if (total == 0) printf("CHECK OK preload_threads: %d threads x %d broadcasts on %d ranks\n", NTHREADS + 1, ITERS, world_size);
        else printf("CHECK FAILED preload_threads: %d failures\n", total);
    }
    MPI_Finalize();
    return total == 0 ? 0 : 1;
}
