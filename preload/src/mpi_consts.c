/* MPI constants that are C macros, which bindgen cannot export to Rust. */
#include <mpi.h>

/* Open MPI: (void *) 1; MPICH: (void *) -1. */
void *const treecast_preload_mpi_in_place = MPI_IN_PLACE;
