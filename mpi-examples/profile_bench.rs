//! What profiling (`TREECAST_PROFILE`) costs a 1 KiB `topo_bcast`, measured side by side in one
//! process.
//!
//! ```text
//! cargo build --release --example profile_bench
//! mpirun -np 2 target/release/examples/profile_bench [ROUNDS=201] [CALLS=1000] [BYTES=1024]
//! ```
//!
//! The program turns profiling on (it sets `TREECAST_PROFILE` to a temporary file unless the
//! environment already names one), makes the world communicator's treecast state, and then
//! times loops of `CALLS` broadcasts in alternating batches with the communicator's profile
//! recording enabled and disabled: every rank flips the same flag of its own state between
//! batches, so both variants run in the same processes over the same connections with the same
//! cached plan, and the only difference is the work profiling adds to each call (counting it,
//! and for a sample of calls two clock reads and a histogram update). Which variant goes first
//! alternates by round, so drift on a shared machine hits both alike. A batch's time is its slowest rank's; the result is the median over
//! rounds of each round's profiled / unprofiled ratio (paired, so slow phases cancel), with the
//! ratio of the two variants' medians and of their 10th percentiles (a batch the scheduler
//! interrupted is only ever slower, so the low percentiles show the undisturbed cost), and the
//! quartiles of the paired ratios for the spread. Profiling is left
//! enabled at the end, so the profile is written at `MPI_Finalize` as in a real job.
//!
//! Prints `profiling cost +x% (goal <= +2%): met` or `NOT met`. Keep `TREECAST_PROFILE_COMPARE`
//! unset: comparisons would add `MPI_Bcast` calls to the profiled batches.

use mpi::traits::*;
use treecast::TopoBcast;

fn median(v: &mut [f64]) -> f64 {
    quantile(v, 0.5)
}

fn quantile(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    let x = q * (v.len() - 1) as f64;
    let (lo, hi) = (x.floor() as usize, x.ceil() as usize);
    v[lo] + (v[hi] - v[lo]) * (x - lo as f64)
}

/// Seconds per call of one batch of `calls` broadcasts, the slowest rank's.
fn batch<C: Communicator>(world: &C, buf: &mut [u8], calls: usize) -> f64 {
    world.barrier();
    let t0 = mpi::time();
    for _ in 0..calls {
        if let Err(e) = world.topo_bcast(&mut buf[..], 0) {
            eprintln!("rank {}: topo_bcast failed: {e}", world.rank());
            world.abort(1);
        }
    }
    let mine = (mpi::time() - t0) / calls as f64;
    let mut slowest = 0.0;
    world.all_reduce_into(&mine, &mut slowest, mpi::collective::SystemOperation::max());
    slowest
}

/// Turn recording of `comm`'s profile on or off on this rank (every rank flips it between the
/// same two batches, so the ranks never disagree while broadcasting).
fn set_profiling<C: mpi::raw::AsRaw<Raw = mpi::ffi::MPI_Comm>>(comm: &C, on: bool) {
    // SAFETY: a valid intra-communicator; the state exists (a broadcast was made) and the
    // reference is held only for this statement.
    let slot = unsafe { treecast::runtime::state::get_or_create(comm.as_raw()) }.expect("treecast state");
    slot.lock().unwrap_or_else(|p| p.into_inner()).profile.enabled = on;
}

fn main() {
    // Our own temporary profile (removed at the end) unless the environment names one to keep.
    let own_profile = std::env::var_os("TREECAST_PROFILE").is_none().then(|| {
        let path = std::env::temp_dir().join(format!("treecast-profile-bench-{}.json", std::process::id()));
        // Single-threaded here: MPI is not initialised yet.
        std::env::set_var("TREECAST_PROFILE", &path);
        path
    });
    if std::env::var_os("TREECAST_PROFILE_COMPARE").is_some() {
        eprintln!("profile_bench: unset TREECAST_PROFILE_COMPARE (it adds MPI_Bcast calls to profiled batches)");
        std::process::exit(2);
    }
    let a: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, d: usize| a.get(i).and_then(|s| s.parse().ok()).unwrap_or(d);
    let (rounds, calls, bytes) = (arg(0, 201).max(1), arg(1, 1000).max(1), arg(2, 1024));

    let universe = mpi::initialize().expect("MPI initialisation failed");
    let world = universe.world();
    let mut buf = vec![world.rank() as u8; bytes];
    // Warm-up: the state (collective), connections and the plan; both variants.
    batch(&world, &mut buf, calls);
    {
        // SAFETY: as in set_profiling.
        let slot = unsafe { treecast::runtime::state::get_or_create(world.as_raw()) }.expect("treecast state");
        if !slot.lock().unwrap_or_else(|p| p.into_inner()).profile.enabled {
            eprintln!("profile_bench: profiling did not turn on (is TREECAST_PROFILE the same on every rank?)");
            world.abort(2);
        }
    }
    set_profiling(&world, false);
    batch(&world, &mut buf, calls);

    let (mut on, mut off) = (Vec::with_capacity(rounds), Vec::with_capacity(rounds));
    for r in 0..rounds {
        for profiled in if r % 2 == 0 { [true, false] } else { [false, true] } {
            set_profiling(&world, profiled);
            let t = batch(&world, &mut buf, calls);
            if profiled { &mut on } else { &mut off }.push(t);
        }
    }
    set_profiling(&world, true);

    if world.rank() == 0 {
        let mut paired: Vec<f64> = on.iter().zip(&off).map(|(p, o)| p / o).collect();
        let cost = median(&mut paired);
        let (q1, q3) = (quantile(&mut paired, 0.25), quantile(&mut paired, 0.75));
        let (m_on, m_off) = (median(&mut on), median(&mut off));
        let (low_on, low_off) = (quantile(&mut on, 0.1), quantile(&mut off, 0.1));
        println!(
            "topo_bcast of {bytes} bytes on {} ranks, {rounds} rounds x {calls} calls per variant",
            world.size()
        );
        println!(
            "profiling on: median {:.3} us/call   off: {:.3} us/call   (ratio of medians {:+.2}%, of 10th percentiles {:+.2}%)",
            m_on * 1e6,
            m_off * 1e6,
            (m_on / m_off - 1.0) * 100.0,
            (low_on / low_off - 1.0) * 100.0
        );
        println!(
            "profiling cost {:+.2}% (goal <= +2%): {}   [paired per-round ratios, quartiles {:+.2}% .. {:+.2}%; {:.0} ns/call]",
            (cost - 1.0) * 100.0,
            if cost <= 1.02 { "met" } else { "NOT met" },
            (q1 - 1.0) * 100.0,
            (q3 - 1.0) * 100.0,
            (cost - 1.0) * m_off * 1e9
        );
    }
    drop(universe); // MPI_Finalize: rank 0 writes the profile
    if let Some(path) = own_profile {
        let _ = std::fs::remove_file(path);
    }
}
