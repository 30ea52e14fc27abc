//! The smallest treecast program: broadcast a vector with `topo_bcast` instead of `MPI_Bcast`.
//!
//! ```text
//! cargo build --release --example rust_bcast
//! mpirun -np 4 target/release/examples/rust_bcast
//! ```

use mpi::traits::*;
use treecast::TopoBcast;

fn main() {
    let universe = mpi::initialize().expect("MPI initialisation failed");
    let world = universe.world();
    let root = 0;
    let mut data = vec![0u64; 1 << 16];
    if world.rank() == root {
        for (i, x) in data.iter_mut().enumerate() {
            *x = (i as u64).wrapping_mul(2654435761);
        }
    }
    // Exactly MPI_Bcast's semantics: every rank ends with the root's data.
    if let Err(e) = world.topo_bcast(&mut data[..], root) {
        eprintln!("rank {}: topo_bcast failed: {e}", world.rank());
        std::process::exit(1);
    }
    let ok = data
        .iter()
        .enumerate()
        .all(|(i, &x)| x == (i as u64).wrapping_mul(2654435761));
    println!(
        "rank {} of {}: received {} values, correct: {ok}",
        world.rank(),
        world.size(),
        data.len()
    );
    if !ok {
        std::process::exit(1);
    }
}
