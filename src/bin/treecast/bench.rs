//! `treecast bench` (run under mpirun): topo_bcast vs MPI_Bcast, side by side in one run.
//!
//! For each size, every iteration runs MPI_Bcast and topo_bcast on the same buffer so both see
//! the same machine noise, and the order flips every iteration (even: MPI first, odd: topo
//! first) so neither always runs straight after the barrier-synchronised start nor always in
//! the wake of the other's traffic. Each broadcast is timed from its own barrier; one
//! iteration's time is the slowest rank's (max over ranks); the table reports medians and the
//! median of the paired ratios topo/MPI (each iteration's, or each batch pair's).
//!
//! `--mode loop` measures back-to-back calls instead: batches of [`BATCH`] calls of one kind,
//! the two kinds' batches alternating, each batch's time per call taken on the slowest rank, the
//! median over batches reported (what a program that broadcasts in a loop sees, where per-call
//! costs add up and nothing hides behind a barrier). `--mode both` (the default) prints both
//! tables. Every row up to 64 KiB is judged against the goal, topo_bcast / MPI_Bcast <= 1.03:
//! `met` or `NOT met`.
//!
//! Last, the per-call cost of treecast's dispatch: topo_bcast against MPI_Bcast of 8 bytes on
//! `MPI_COMM_SELF`, where neither moves data, back to back, in nanoseconds.
//!
//! Sizes are `--min * --step^k`, plus `--max` itself (a geometric step usually overshoots it, and
//! the largest size asked for must be measured) and 64 KiB (the upper end of the small-message
//! latency target, which powers of 4 from 8 B skip), sorted and without repeats.

use crate::CliError;
use mpi::collective::SystemOperation;
use mpi::traits::*;
use serde::Serialize;
use treecast::runtime::config::parse_bytes;
use treecast::TopoBcast;

#[derive(clap::Args)]
pub struct Args {
    /// Smallest message size (bytes; suffixes KiB, MiB accepted).
    #[arg(long, default_value = "8")]
    min: String,
    /// Largest message size (always measured, as the last row).
    #[arg(long, default_value = "16MiB")]
    max: String,
    /// Size multiplier between steps.
    #[arg(long, default_value_t = 4)]
    step: u64,
    /// Root rank; `rotate` cycles the root every iteration.
    #[arg(long, default_value = "0")]
    root: String,
    /// Iterations per size for small messages (fewer for large ones).
    #[arg(long, default_value_t = 200)]
    iters: u64,
    /// Output format.
    #[arg(long, default_value = "text", value_parser = ["text", "json"])]
    format: String,
    /// barrier (each call after its own barrier), loop (back-to-back batches) or both.
    #[arg(long, default_value = "both", value_parser = ["barrier", "loop", "both"])]
    mode: String,
}

/// Calls per batch and batches per size in loop mode (the measurement: medians of 41
/// batches of 50).
const BATCH: u64 = 50;
const BATCHES: u64 = 41;

/// The goal for messages up to 64 KiB: topo_bcast / MPI_Bcast at most this.
const GOAL: f64 = 1.03;

#[derive(Serialize)]
struct Row {
    mode: &'static str,
    bytes: u64,
    iterations: u64,
    mpi_bcast_median_us: f64,
    topo_bcast_median_us: f64,
    /// Median over iterations (batches in loop mode) of each one's topo / MPI time: paired,
    /// so a slow phase of the machine hits both sides of a pair and cancels.
    ratio: f64,
    /// Ratio of the two medians (unpaired; noisier, kept for comparison).
    ratio_of_medians: f64,
    /// For sizes up to 64 KiB: whether the ratio meets [`GOAL`].
    goal_met: Option<bool>,
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    }
}

/// 64 KiB: the upper end of the small-message latency target (8 B .. 64 KiB), measured
/// whenever it lies in the sweep's range.
const LATENCY_TARGET_MAX: u64 = 64 * 1024;

/// The message sizes of a sweep: `min * step^k` up to `max`, plus `max` and 64 KiB when in
/// range; ascending, no repeats. Needs `0 < min <= max` and `step >= 2`.
fn sweep_sizes(min: u64, max: u64, step: u64) -> Vec<u64> {
    let mut sizes = Vec::new();
    let mut size = min;
    while size <= max {
        sizes.push(size);
        size = match size.checked_mul(step) {
            Some(s) => s,
            None => break,
        };
    }
    sizes.push(max);
    if (min..=max).contains(&LATENCY_TARGET_MAX) {
        sizes.push(LATENCY_TARGET_MAX);
    }
    sizes.sort_unstable();
    sizes.dedup();
    sizes
}

pub fn run(args: Args) -> Result<(), CliError> {
    let min = parse_bytes(&args.min).ok_or_else(|| CliError::Input(format!("--min: bad size '{}'", args.min)))?;
    let max = parse_bytes(&args.max).ok_or_else(|| CliError::Input(format!("--max: bad size '{}'", args.max)))?;
    if min == 0 || max < min || args.step < 2 {
        return Err(CliError::Input("need 0 < --min <= --max and --step >= 2".into()));
    }
    let rotate = args.root == "rotate";
    let fixed_root: i32 = if rotate {
        0
    } else {
        args.root
            .parse()
            .map_err(|_| CliError::Input(format!("--root: expected a rank or 'rotate', got '{}'", args.root)))?
    };
    let universe = mpi::initialize().ok_or_else(|| CliError::Failed("MPI is already initialized".into()))?;
    let world = universe.world();
    let (me, n) = (world.rank(), world.size());
    if fixed_root < 0 || fixed_root >= n {
        return Err(CliError::Input(format!(
            "--root {fixed_root} out of range for {n} ranks"
        )));
    }
    world.topo_init().map_err(|e| CliError::Failed(e.to_string()))?;
    let mut rows = Vec::new();
    let root_of = |it: u64| if rotate { (it % n as u64) as i32 } else { fixed_root };
    for size in sweep_sizes(min, max, args.step) {
        if args.mode != "loop" {
            rows.push(barrier_row(&world, size, args.iters, &root_of)?);
        }
        if args.mode != "barrier" {
            rows.push(loop_row(&world, size, &root_of)?);
        }
    }
    let dispatch_ns = dispatch_overhead_ns(&universe)?;
    if me == 0 {
        if args.format == "json" {
            let out =
                serde_json::json!({ "ranks": n, "root": args.root, "rows": rows, "dispatch_overhead_ns": dispatch_ns });
            println!("{}", serde_json::to_string_pretty(&out).expect("json"));
        } else {
            println!("treecast bench: {n} ranks, root {}", args.root);
            for mode in ["barrier", "loop"] {
                if !rows.iter().any(|r| r.mode == mode) {
                    continue;
                }
                println!(
                    "{mode}: {}",
                    if mode == "barrier" {
                        "each call timed from its own barrier, slowest rank, medians over iterations; topo/MPI: median of the paired ratios"
                    } else {
                        "batches of 50 back-to-back calls, slowest rank per call, medians over 41 batches; topo/MPI: median of the paired ratios"
                    }
                );
                println!(
                    "{:>12} {:>8} {:>16} {:>16} {:>10}  goal <= {GOAL}",
                    "bytes", "iters", "MPI_Bcast us", "topo_bcast us", "topo/MPI"
                );
                for r in rows.iter().filter(|r| r.mode == mode) {
                    println!(
                        "{:>12} {:>8} {:>16.3} {:>16.3} {:>10.3}  {}",
                        r.bytes,
                        r.iterations,
                        r.mpi_bcast_median_us,
                        r.topo_bcast_median_us,
                        r.ratio,
                        match r.goal_met {
                            Some(true) => "met",
                            Some(false) => "NOT met",
                            None => "",
                        }
                    );
                }
            }
            let judged: Vec<&Row> = rows.iter().filter(|r| r.goal_met.is_some()).collect();
            let met = judged.iter().filter(|r| r.goal_met == Some(true)).count();
            println!(
                "goal (topo/MPI <= {GOAL} up to 64 KiB): {met} of {} rows met{}",
                judged.len(),
                if met == judged.len() { "" } else { " -- NOT met" }
            );
            println!("dispatch overhead: {dispatch_ns:.1} ns per call (topo_bcast - MPI_Bcast, 8 B on MPI_COMM_SELF)");
        }
    }
    Ok(())
}

/// A row from the slowest rank's times, `mpi[i]` and `topo[i]` measured side by side in
/// iteration (or batch) `i`. The judged ratio is the median of the paired ratios: with calls of
/// a few hundred nanoseconds the machine's phases move both medians by more than the 3% the
/// goal allows (the unpaired ratio of medians of one binary swung from 0.88 to 1.08 between
/// runs), while a pair shares its phase.
fn row(mode: &'static str, bytes: u64, iterations: u64, mpi: &mut [f64], topo: &mut [f64]) -> Row {
    let mut paired: Vec<f64> = mpi
        .iter()
        .zip(topo.iter())
        .filter(|(m, _)| **m > 0.0)
        .map(|(m, t)| t / m)
        .collect();
    let ratio = median(&mut paired);
    let m = median(mpi) * 1e6;
    let t = median(topo) * 1e6;
    Row {
        mode,
        bytes,
        iterations,
        mpi_bcast_median_us: m,
        topo_bcast_median_us: t,
        ratio,
        ratio_of_medians: t / m,
        goal_met: (bytes <= LATENCY_TARGET_MAX).then_some(ratio <= GOAL),
    }
}

/// One broadcast of `buf` from `root` by topo_bcast or MPI_Bcast.
fn one(world: &mpi::topology::SimpleCommunicator, topo: bool, buf: &mut [u8], root: i32) -> Result<(), CliError> {
    if topo {
        world.topo_bcast(buf, root).map_err(|e| CliError::Failed(e.to_string()))
    } else {
        world.process_at_rank(root).broadcast_into(buf);
        Ok(())
    }
}

/// Each call after its own barrier; the slowest rank per iteration; medians.
fn barrier_row(
    world: &mpi::topology::SimpleCommunicator,
    size: u64,
    iters_small: u64,
    root_of: &dyn Fn(u64) -> i32,
) -> Result<Row, CliError> {
    let me = world.rank();
    let iters = (iters_small * 65536 / size.max(65536)).clamp(5, iters_small);
    let warmup = 3.min(iters);
    let mut buf = vec![0u8; size as usize];
    let mut mpi_t = Vec::with_capacity(iters as usize);
    let mut topo_t = Vec::with_capacity(iters as usize);
    for it in 0..(iters + warmup) {
        let root = root_of(it);
        if me == root {
            buf.iter_mut().for_each(|b| *b = it as u8);
        }
        let mut t_mpi = 0.0;
        let mut t_topo = 0.0;
        // Even iterations MPI first, odd ones topo first.
        for topo in [it % 2 == 1, it % 2 == 0] {
            world.barrier();
            let t0 = mpi::time();
            one(world, topo, &mut buf, root)?;
            if topo {
                t_topo = mpi::time() - t0;
                // On topo-first iterations non-roots still hold the previous iteration's
                // bytes, so this catches a topo_bcast that delivered nothing.
                if buf.first().is_some_and(|&b| b != it as u8) || buf.last().is_some_and(|&b| b != it as u8) {
                    return Err(CliError::Failed(format!("rank {me}: wrong data at {size} bytes")));
                }
            } else {
                t_mpi = mpi::time() - t0;
            }
        }
        if it >= warmup {
            mpi_t.push(t_mpi);
            topo_t.push(t_topo);
        }
    }
    let (mut mpi_max, mut topo_max) = slowest(world, &mpi_t, &topo_t);
    Ok(row("barrier", size, iters, &mut mpi_max, &mut topo_max))
}

/// Batches of back-to-back calls, the two kinds alternating; time per call of each batch on the
/// slowest rank; medians over batches. Messages above 64 KiB use fewer calls per batch.
fn loop_row(
    world: &mpi::topology::SimpleCommunicator,
    size: u64,
    root_of: &dyn Fn(u64) -> i32,
) -> Result<Row, CliError> {
    let batch = (BATCH * 65536 / size.max(65536)).max(1);
    let batches = if size <= LATENCY_TARGET_MAX { BATCHES } else { 9 };
    let mut buf = vec![1u8; size as usize];
    let mut mpi_t = Vec::with_capacity(batches as usize);
    let mut topo_t = Vec::with_capacity(batches as usize);
    // One untimed batch of each kind first (connections, plans, route trials).
    for b in 0..(batches + 1) {
        for topo in [b % 2 == 1, b % 2 == 0] {
            world.barrier();
            let t0 = mpi::time();
            for k in 0..batch {
                one(world, topo, &mut buf, root_of(k))?;
            }
            let per_call = (mpi::time() - t0) / batch as f64;
            if b > 0 {
                if topo {
                    topo_t.push(per_call);
                } else {
                    mpi_t.push(per_call);
                }
            }
        }
    }
    let (mut mpi_max, mut topo_max) = slowest(world, &mpi_t, &topo_t);
    Ok(row("loop", size, batch * batches, &mut mpi_max, &mut topo_max))
}

/// Per entry, the slowest rank's value of each series.
fn slowest(world: &mpi::topology::SimpleCommunicator, mpi_t: &[f64], topo_t: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let mut mpi_max = vec![0.0f64; mpi_t.len()];
    let mut topo_max = vec![0.0f64; topo_t.len()];
    world.all_reduce_into(mpi_t, &mut mpi_max[..], SystemOperation::max());
    world.all_reduce_into(topo_t, &mut topo_max[..], SystemOperation::max());
    (mpi_max, topo_max)
}

/// topo_bcast minus MPI_Bcast per call on `MPI_COMM_SELF` (8 bytes, back to back; medians of
/// 21 alternating batches of 20,000 calls), nanoseconds: what treecast's dispatch costs.
fn dispatch_overhead_ns(universe: &mpi::environment::Universe) -> Result<f64, CliError> {
    let _ = universe;
    let me = mpi::topology::SimpleCommunicator::self_comm();
    let mut buf = [7u8; 8];
    let (mut mpi_t, mut topo_t) = (Vec::new(), Vec::new());
    for b in 0..22 {
        for topo in [b % 2 == 1, b % 2 == 0] {
            let t0 = mpi::time();
            for _ in 0..20_000 {
                one(&me, topo, &mut buf, 0)?;
            }
            let per = (mpi::time() - t0) / 20_000.0;
            if b > 0 {
                if topo {
                    topo_t.push(per);
                } else {
                    mpi_t.push(per);
                }
            }
        }
    }
    Ok((median(&mut topo_t) - median(&mut mpi_t)) * 1e9)
}

#[cfg(test)]
mod tests {
    use super::sweep_sizes;

    #[test]
    fn sweep_ends_at_max_and_includes_64k() {
        const KIB: u64 = 1024;
        const MIB: u64 = 1024 * KIB;
        let d = sweep_sizes(8, 16 * MIB, 4);
        assert_eq!(d.first(), Some(&8));
        assert_eq!(d.last(), Some(&(16 * MIB)));
        assert!(d.contains(&(64 * KIB)));
        assert!(d.windows(2).all(|w| w[0] < w[1]), "{d:?}");
        // The step lands on max: no repeat.
        assert_eq!(
            sweep_sizes(8, 64 * KIB, 2).iter().filter(|&&s| s == 64 * KIB).count(),
            1
        );
        assert_eq!(sweep_sizes(1, 1, 2), vec![1]);
        assert_eq!(sweep_sizes(100, 1000, 4), vec![100, 400, 1000]);
        assert_eq!(sweep_sizes(u64::MAX / 2, u64::MAX, 4), vec![u64::MAX / 2, u64::MAX]);
    }
}
