/*
 * C example: topo_bcast in place of MPI_Bcast, checked against MPI_Bcast for every root, with
 * MPI_INT, MPI_DOUBLE and a strided MPI_Type_vector, on MPI_COMM_WORLD and a split communicator;
 * then the error codes for bad arguments.
 *
 *   mpicc -O2 -I include mpi-examples/c_bcast.c -L target/release -ltreecast \
 *         -Wl,-rpath,$PWD/target/release -o c_bcast
 *   mpirun -np 4 ./c_bcast
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>
#include "treecast.h"

static int failures = 0;

static void fill(unsigned char *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)((i * 2654435761u + seed * 40503u) >> 13);
}

/* Broadcast with MPI_Bcast and topo_bcast into identical buffers; compare every byte. */
static void check(MPI_Comm comm, MPI_Datatype type, int count, size_t bytes, const char *what) {
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    unsigned char *a = malloc(bytes + 1), *b = malloc(bytes + 1);
    for (int root = 0; root < size; root++) {
        fill(a, bytes, rank == root ? 1000u + root : 7u + rank);
        memcpy(b, a, bytes);
        MPI_Bcast(a, count, type, root, comm);
        int rc = topo_bcast(b, count, type, root, comm);
        if (rc != MPI_SUCCESS) {
            char msg[256];
            treecast_last_error(msg, sizeof msg);
            fprintf(stderr, "%s root %d rank %d: topo_bcast returned %d: %s\n", what, root, rank, rc, msg);
            failures++;
        } else if (memcmp(a, b, bytes) != 0) {
            fprintf(stderr, "%s root %d rank %d: data differs from MPI_Bcast\n", what, root, rank);
            failures++;
        }
    }
    free(a);
    free(b);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    MPI_Datatype strided;
    MPI_Type_vector(4, 3, 5, MPI_DOUBLE, &strided); /* 4 blocks of 3 doubles, stride 5 */
    MPI_Type_commit(&strided);
    MPI_Aint lb, extent;
    MPI_Type_get_extent(strided, &lb, &extent);

    MPI_Comm split;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &split);
    MPI_Comm comms[2] = {MPI_COMM_WORLD, split};
    const char *names[2] = {"world", "split"};
    int counts[] = {0, 1, 7, 1000, 300000};
    for (int c = 0; c < 2; c++) {
        for (unsigned k = 0; k < sizeof counts / sizeof counts[0]; k++) {
            char what[64];
            snprintf(what, sizeof what, "%s int x%d", names[c], counts[k]);
            check(comms[c], MPI_INT, counts[k], counts[k] * sizeof(int), what);
            snprintf(what, sizeof what, "%s double x%d", names[c], counts[k]);
            check(comms[c], MPI_DOUBLE, counts[k], counts[k] * sizeof(double), what);
            snprintf(what, sizeof what, "%s strided x%d", names[c], counts[k] / 10);
            check(comms[c], strided, counts[k] / 10, (size_t)(counts[k] / 10) * extent, what);
        }
    }

    /* Bad arguments give MPI error codes, never abort. */
    int buf[4] = {0};
    if (topo_bcast(buf, 4, MPI_INT, size, MPI_COMM_WORLD) != MPI_ERR_ROOT) failures++;
    if (topo_bcast(buf, -1, MPI_INT, 0, MPI_COMM_WORLD) != MPI_ERR_COUNT) failures++;
    if (topo_bcast(buf, 4, MPI_DATATYPE_NULL, 0, MPI_COMM_WORLD) != MPI_ERR_TYPE) failures++;
    if (topo_bcast(buf, 4, MPI_INT, 0, MPI_COMM_NULL) != MPI_ERR_COMM) failures++;
    if (topo_bcast(NULL, 4, MPI_INT, 0, MPI_COMM_WORLD) != MPI_ERR_BUFFER) failures++;
    char msg[256];
    treecast_last_error(msg, sizeof msg);
    if (strstr(msg, "NULL") == NULL) {
        fprintf(stderr, "last error message does not explain the NULL buffer: %s\n", msg);
        failures++;
    }

    /* Routes: on one host (how the tests run) every root's broadcasts take the library's
     * MPI_Bcast; with TREECAST_ROUTE=plan, world's 7-int broadcasts from root 0 (run above)
     * took the plan. Bad arguments are errors. */
    int route = -1;
    if (treecast_route(MPI_COMM_WORLD, 0, 7 * sizeof(int), &route) != MPI_SUCCESS) failures++;
    const char *forced = getenv("TREECAST_ROUTE");
    int want = forced && strcmp(forced, "plan") == 0 ? TREECAST_ROUTE_PLAN : TREECAST_ROUTE_LIBRARY;
    if (route != want) {
        fprintf(stderr, "treecast_route: %d, want %d\n", route, want);
        failures++;
    }
    if (treecast_route(MPI_COMM_WORLD, size, 16, &route) != MPI_ERR_ROOT) failures++;
    if (treecast_route(MPI_COMM_WORLD, 0, -1, &route) != MPI_ERR_COUNT) failures++;
    if (treecast_route(MPI_COMM_WORLD, 0, 16, NULL) != MPI_ERR_ARG) failures++;
    if (treecast_route(MPI_COMM_NULL, 0, 16, &route) != MPI_ERR_COMM) failures++;

    /* The state cached on `split` is freed with it (the attribute delete callback). */
    MPI_Comm_free(&split);
    MPI_Type_free(&strided);

    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        if (total == 0) printf("CHECK OK c_bcast on %d ranks\n", size);
        else printf("CHECK FAILED c_bcast: %d failures\n", total);
    }
    MPI_Finalize();
    return total == 0 ? 0 : 1;
}
