# Sourced by the scripts: environment for running Open MPI jobs from them.
# Root may run mpirun (containers and CI run as root); oversubscription is explicit per call.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export PATH="$HOME/.cargo/bin:$PATH"
# Keep jobs on this machine's transports; no warnings about absent fabrics.
export OMPI_MCA_btl="${OMPI_MCA_btl:-self,vader,tcp}"
