/*
 * treecast: network-topology-aware broadcast for MPI programs.
 *
 * Link with -ltreecast (target/release/libtreecast.so). Call topo_bcast wherever you would call
 * MPI_Bcast: same arguments, same results, MPI error codes returned (never fatal: the
 * communicator's error handler is not invoked).
 */
#ifndef TREECAST_H
#define TREECAST_H

#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Broadcast `count` elements of `datatype` at `buffer` from `root` to every rank of `comm`.
 * Exactly MPI_Bcast's signature and contract. The first call on a communicator is collective
 * set-up (it duplicates `comm` and learns the network topology); the state is cached on `comm`
 * and freed with it.
 *
 * Returns MPI_SUCCESS, or an MPI error code: MPI_ERR_ROOT (root out of range), MPI_ERR_COUNT
 * (negative count), MPI_ERR_TYPE (null datatype), MPI_ERR_BUFFER (NULL buffer with count > 0),
 * MPI_ERR_COMM (null or inter-communicator), MPI_ERR_TRUNCATE (this rank's count/datatype does
 * not match the root's), MPI_ERR_OTHER (a rank upstream in the broadcast plan failed, so this
 * rank's data is not valid), MPI_ERR_INTERN. treecast_last_error() gives the message.
 */
int topo_bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm);

/* Collective: set up treecast for `comm` now (probe the network, ...) rather than at the first
 * topo_bcast. Optional. */
int treecast_init(MPI_Comm comm);

/* Local (no communication): which route broadcasts of `bytes` bytes from `root` take on `comm`,
 * written to *route: TREECAST_ROUTE_PLAN (treecast's sends), TREECAST_ROUTE_LIBRARY (the MPI
 * library's MPI_Bcast on treecast's duplicate), TREECAST_ROUTE_TRIAL (the first calls of a root
 * and size may time both, alternating) or TREECAST_ROUTE_UNSEEN (not decided before the first
 * such call). The same on every rank after the same calls. Returns MPI_SUCCESS, MPI_ERR_COMM,
 * MPI_ERR_ROOT, MPI_ERR_COUNT (negative bytes) or MPI_ERR_ARG (NULL route). */
enum {
    TREECAST_ROUTE_UNSEEN = 0,
    TREECAST_ROUTE_TRIAL = 1,
    TREECAST_ROUTE_PLAN = 2,
    TREECAST_ROUTE_LIBRARY = 3
};
int treecast_route(MPI_Comm comm, int root, long long bytes, int *route);

/* Copy this thread's last treecast error message into `buf` (NUL-terminated, at most `len`
 * bytes); returns the message's full length. Pass (NULL, 0) to query the length. */
int treecast_last_error(char *buf, int len);

#ifdef __cplusplus
}
#endif

#endif /* TREECAST_H */
