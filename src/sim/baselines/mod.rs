//! MPI baseline broadcast algorithms as plans.
