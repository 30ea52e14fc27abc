//! `treecast bench` (run under mpirun): topo_bcast vs MPI_Bcast, side by side in one run.
//!
//! For each size, every iteration runs MPI_Bcast, topo_bcast and a control — MPI_Bcast again,
//! on a duplicate of the world — on the same buffer so all see the same machine noise, in an
//! order that rotates every iteration so none always runs straight after the
//! barrier-synchronised start nor always in the wake of another's traffic. Each broadcast is
//! timed from its own barrier; one iteration's time is the slowest rank's (max over ranks); the
//! table reports medians and the median of the paired ratios topo/MPI (each iteration's, or
//! each batch's) with its 95% confidence interval, and the control's MPI/MPI ratio: what noise
//! alone reads.
//!
//! `--mode loop` measures back-to-back calls instead: batches of [`BATCH`] calls of one kind,
//! the kinds' batches rotating, each batch's time per call taken on the slowest rank, the
//! median over batches reported (what a program that broadcasts in a loop sees, where per-call
//! costs add up and nothing hides behind a barrier). `--mode both` (the default) prints both
//! tables. Every row up to 64 KiB is judged against the goal, topo_bcast / MPI_Bcast <= 1.03,
//! by its interval: `met` (all of it within), `NOT met` (all of it above) or `within noise`.
//!
//! What is timed is the route topo_bcast settled on: its first calls of a root and size may be a
//! trial that alternates between treecast's plan and the library's `MPI_Bcast` (up to 42
//! calls, `runtime::route`), so a row's untimed warm-up lasts until `topo_route` reports the
//! route settled from every root, and the row names that route (`route`). Timing the trial
//! instead mixed both routes into a 40-iteration row: on the emulated 3x3 cluster, 2 of 10 runs
//! of the demo's sweep read 1 KiB NOT met (1.17, 1.20; once on the library route itself),
//! where 200 iterations, most of them after the trial, read 0.87-1.06 and none NOT met.
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
use treecast::runtime::route::TRIAL_MAX_CALLS;
use treecast::{Route, RouteState, TopoBcast};

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
    /// Iterations per size for small messages (fewer for large ones). Single calls of a few
    /// hundred nanoseconds are timed to a few percent, so a row needs about a thousand for its
    /// interval to decide the 3% goal.
    #[arg(long, default_value_t = 1000)]
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
    /// 95% confidence interval of `ratio` (distribution-free, from order statistics).
    ratio_ci: [f64; 2],
    /// The same measurement of `MPI_Bcast` against itself (on a duplicate of the world, timed in
    /// the same rotation): the ratio the noise alone gives.
    control_ratio: f64,
    /// For sizes up to 64 KiB: `met` (the interval's top within [`GOAL`]), `NOT met` (its
    /// bottom above), or `within noise` (the interval straddles the goal).
    verdict: Option<&'static str>,
    /// The route topo_bcast's timed calls took (`plan`, `library`, `mixed` across roots, or
    /// `trial` if it had not settled when timing began: [`Roots::route`]).
    route: &'static str,
    /// topo_bcast calls of this size before the timed ones: the warm-up and any route trial.
    untimed_calls: u64,
}

/// 95% confidence interval of the median of `sorted` (ascending), distribution-free: the order
/// statistics `k` and `n - 1 - k` with `k = floor((n - 1.96 sqrt(n)) / 2)` (the binomial
/// interval of the median, normal approximation). The whole range below 4 samples.
fn median_ci(sorted: &[f64]) -> [f64; 2] {
    let n = sorted.len();
    if n == 0 {
        return [f64::NAN, f64::NAN];
    }
    let k = ((n as f64 - 1.96 * (n as f64).sqrt()) / 2.0).floor().max(0.0) as usize;
    let k = k.min((n - 1) / 2);
    [sorted[k], sorted[n - 1 - k]]
}

/// The verdict on a row against [`GOAL`] from its ratio's confidence interval.
fn verdict(ci: [f64; 2]) -> &'static str {
    if ci[1] <= GOAL {
        "met"
    } else if ci[0] > GOAL {
        "NOT met"
    } else {
        "within noise"
    }
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

/// The goal line: every judged row `met`, or how many are not and how many the noise leaves
/// open.
fn summary(rows: &[Row]) -> String {
    let judged: Vec<&str> = rows.iter().filter_map(|r| r.verdict).collect();
    let count = |v: &str| judged.iter().filter(|&&x| x == v).count();
    let (met, not, open) = (count("met"), count("NOT met"), count("within noise"));
    let end = if not > 0 {
        " -- NOT met"
    } else if open > 0 {
        " -- not shown: the noise leaves rows open (more --iters)"
    } else {
        ""
    };
    format!(
        "goal (topo/MPI <= {GOAL} up to 64 KiB, judged by the 95% interval): {met} of {} rows met, {not} NOT met, {open} within noise{end}",
        judged.len()
    )
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
    let roots = Roots {
        rotate,
        fixed: fixed_root,
        n,
    };
    let dup = world.duplicate();
    let comms = Comms {
        world: &world,
        dup: &dup,
    };
    for size in sweep_sizes(min, max, args.step) {
        if args.mode != "loop" {
            rows.push(barrier_row(&comms, size, args.iters, &roots)?);
        }
        if args.mode != "barrier" {
            rows.push(loop_row(&comms, size, &roots)?);
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
                        "each call timed from its own barrier, slowest rank, medians over iterations; topo/MPI: median of the paired ratios; untimed first: 3 iterations and any route trial"
                    } else {
                        "batches of 50 back-to-back calls, slowest rank per call, medians over 41 batches; topo/MPI: median of the paired ratios; untimed first: a batch of each and any route trial"
                    }
                );
                println!(
                    "{:>12} {:>8} {:>16} {:>16} {:>10} {:>15} {:>9} {:>8}  goal <= {GOAL}",
                    "bytes", "iters", "MPI_Bcast us", "topo_bcast us", "topo/MPI", "95% interval", "MPI/MPI", "route"
                );
                for r in rows.iter().filter(|r| r.mode == mode) {
                    println!(
                        "{:>12} {:>8} {:>16.3} {:>16.3} {:>10.3} {:>15} {:>9} {:>8}  {}",
                        r.bytes,
                        r.iterations,
                        r.mpi_bcast_median_us,
                        r.topo_bcast_median_us,
                        r.ratio,
                        format!("{:.3}..{:.3}", r.ratio_ci[0], r.ratio_ci[1]),
                        // No control above 64 KiB.
                        if r.control_ratio.is_nan() {
                            "-".to_string()
                        } else {
                            format!("{:.3}", r.control_ratio)
                        },
                        r.route,
                        r.verdict.unwrap_or("")
                    );
                }
            }
            println!("{}", summary(&rows));
            println!("dispatch overhead: {dispatch_ns:.1} ns per call (topo_bcast - MPI_Bcast, 8 B on MPI_COMM_SELF)");
        }
    }
    Ok(())
}

/// A row from the slowest rank's times, `mpi[i]`, `topo[i]` and `control[i]` (MPI_Bcast on a
/// duplicate of the world) measured side by side in iteration (or batch) `i`. The judged ratio
/// is the median of the paired ratios: with calls of a few hundred nanoseconds the machine's
/// phases move both medians by more than the 3% the goal allows (the unpaired ratio of medians
/// of one binary swung from 0.88 to 1.08 between runs), while a pair shares its phase. Its
/// confidence interval decides the verdict: on the emulated cluster (nine ranks on two cores)
/// single rows of MPI_Bcast against itself read 0.9-1.1, so a point estimate above 1.03 alone
/// does not show a slower broadcast, nor one below it a fast enough one.
fn row(mode: &'static str, bytes: u64, iterations: u64, mpi: &mut [f64], topo: &mut [f64], control: &[f64]) -> Row {
    let paired = |a: &[f64], b: &[f64]| -> Vec<f64> {
        let mut v: Vec<f64> = a
            .iter()
            .zip(b.iter())
            .filter(|(m, _)| **m > 0.0)
            .map(|(m, t)| t / m)
            .collect();
        v.sort_by(f64::total_cmp);
        v
    };
    let mut ratios = paired(mpi, topo);
    let ratio_ci = median_ci(&ratios);
    let ratio = median(&mut ratios);
    // NaN (null in JSON) when the row had no control.
    let control_ratio = median(&mut paired(mpi, control));
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
        ratio_ci,
        control_ratio,
        verdict: (bytes <= LATENCY_TARGET_MAX).then(|| verdict(ratio_ci)),
        route: "trial",
        untimed_calls: 0,
    }
}

/// Whether a row times the control: only where the goal judges it (up to 64 KiB). Above, the
/// control would repeat the slowest calls of the sweep (2.8 s per 16 MiB MPI_Bcast on the
/// emulated cluster) for a ratio nobody judges.
fn controlled(size: u64) -> bool {
    size <= LATENCY_TARGET_MAX
}

/// What a timed call runs.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Mpi,
    Topo,
    /// MPI_Bcast on a duplicate of the world: the control.
    Control,
}

/// The order of the three kinds in iteration `it`: each kind in each position equally often,
/// so none always runs straight after the barrier or in another's wake.
fn order(it: u64) -> [Kind; 3] {
    const ALL: [Kind; 3] = [Kind::Mpi, Kind::Topo, Kind::Control];
    let r = (it % 3) as usize;
    let o = [ALL[r], ALL[(r + 1) % 3], ALL[(r + 2) % 3]];
    if (it / 3) % 2 == 1 {
        [o[2], o[1], o[0]]
    } else {
        o
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

/// The communicators a row times on: the world, and its duplicate for the control.
struct Comms<'a> {
    world: &'a mpi::topology::SimpleCommunicator,
    dup: &'a mpi::topology::SimpleCommunicator,
}

impl Comms<'_> {
    fn call(&self, kind: Kind, buf: &mut [u8], root: i32) -> Result<(), CliError> {
        match kind {
            Kind::Mpi => one(self.world, false, buf, root),
            Kind::Topo => one(self.world, true, buf, root),
            Kind::Control => one(self.dup, false, buf, root),
        }
    }
}

/// The roots a sweep broadcasts from: one, or every rank in turn (`--root rotate`).
struct Roots {
    rotate: bool,
    fixed: i32,
    n: i32,
}

impl Roots {
    /// The root of iteration (or call) `it`.
    fn of(&self, it: u64) -> i32 {
        if self.rotate {
            (it % self.n as u64) as i32
        } else {
            self.fixed
        }
    }

    fn all(&self) -> Vec<i32> {
        if self.rotate {
            (0..self.n).collect()
        } else {
            vec![self.fixed]
        }
    }

    /// Whether topo_bcast of `size` bytes has settled on a route from every root, and on which
    /// (`plan`, `library`, `mixed` when roots differ, `trial` while any is not settled). The
    /// same on every rank: route decisions are collective.
    fn route(&self, world: &mpi::topology::SimpleCommunicator, size: u64) -> Result<&'static str, CliError> {
        let mut seen = None;
        for root in self.all() {
            let state = world
                .topo_route(root, size)
                .map_err(|e| CliError::Failed(e.to_string()))?;
            let RouteState::Settled(route) = state else {
                return Ok("trial");
            };
            if seen.is_some_and(|r| r != route) {
                return Ok("mixed");
            }
            seen = Some(route);
        }
        Ok(seen.map_or("trial", Route::key))
    }

    /// Most untimed calls a row spends waiting for its routes to settle: a trial takes at
    /// most `2 * (TRIAL_MAX_CALLS + 1)` calls per root, and a few more cover the first calls.
    fn settle_limit(&self) -> u64 {
        (2 * (TRIAL_MAX_CALLS as u64 + 1) + 3) * self.all().len() as u64
    }
}

/// Each call after its own barrier; the slowest rank per iteration; medians. Untimed first: 3
/// iterations, then more until topo_bcast's route is settled from every root (its first calls of a
/// root and size may be a trial of both routes, alternating; what is timed is the route every
/// later call takes). The row says which route that was.
fn barrier_row(comms: &Comms, size: u64, iters_small: u64, roots: &Roots) -> Result<Row, CliError> {
    let world = comms.world;
    let me = world.rank();
    let iters = (iters_small * 65536 / size.max(65536)).clamp(5, iters_small);
    let mut warmup = 3.min(iters);
    let mut buf = vec![0u8; size as usize];
    let mut t: [Vec<f64>; 3] = std::array::from_fn(|_| Vec::with_capacity(iters as usize));
    let mut it = 0;
    while it < iters + warmup {
        // Every rank reads the same state here, so all extend the warm-up alike.
        if it == warmup && warmup < roots.settle_limit() && roots.route(world, size)? == "trial" {
            warmup += 1;
        }
        let root = roots.of(it);
        if me == root {
            buf.iter_mut().for_each(|b| *b = it as u8);
        }
        let mut took = [0.0; 3];
        let mut topo_done = false;
        for kind in order(it)
            .into_iter()
            .filter(|&k| k != Kind::Control || controlled(size))
        {
            world.barrier();
            let t0 = mpi::time();
            comms.call(kind, &mut buf, root)?;
            took[kind as usize] = mpi::time() - t0;
            // Until topo_bcast has run in this iteration, non-roots may still hold the previous
            // iteration's bytes; after it they must hold this one's, whatever ran before.
            topo_done |= kind == Kind::Topo;
            if topo_done && (buf.first().is_some_and(|&b| b != it as u8) || buf.last().is_some_and(|&b| b != it as u8))
            {
                return Err(CliError::Failed(format!("rank {me}: wrong data at {size} bytes")));
            }
        }
        if it >= warmup {
            for k in 0..if controlled(size) { 3 } else { 2 } {
                t[k].push(took[k]);
            }
        }
        it += 1;
    }
    let [mut mpi_max, mut topo_max, control_max] = slowest(world, &t);
    let mut r = row("barrier", size, iters, &mut mpi_max, &mut topo_max, &control_max);
    (r.route, r.untimed_calls) = (roots.route(world, size)?, warmup);
    Ok(r)
}

/// Batches of back-to-back calls, the kinds alternating; time per call of each batch on the
/// slowest rank; medians over batches. Messages above 64 KiB use fewer calls per batch.
fn loop_row(comms: &Comms, size: u64, roots: &Roots) -> Result<Row, CliError> {
    let world = comms.world;
    let batch = (BATCH * 65536 / size.max(65536)).max(1);
    let batches = if size <= LATENCY_TARGET_MAX { BATCHES } else { 9 };
    let mut buf = vec![1u8; size as usize];
    let mut t: [Vec<f64>; 3] = std::array::from_fn(|_| Vec::with_capacity(batches as usize));
    // One untimed batch of each kind first (connections, plans, route trials), then untimed
    // batches of topo_bcast until its route is settled from every root (as in barrier mode).
    let mut untimed = batch;
    for b in 0..(batches + 1) {
        while b == 1 && untimed < batch + roots.settle_limit() && roots.route(world, size)? == "trial" {
            world.barrier();
            for k in 0..batch {
                comms.call(Kind::Topo, &mut buf, roots.of(k))?;
            }
            untimed += batch;
        }
        for kind in order(b).into_iter().filter(|&k| k != Kind::Control || controlled(size)) {
            world.barrier();
            let t0 = mpi::time();
            for k in 0..batch {
                comms.call(kind, &mut buf, roots.of(k))?;
            }
            let per_call = (mpi::time() - t0) / batch as f64;
            if b > 0 {
                t[kind as usize].push(per_call);
            }
        }
    }
    let [mut mpi_max, mut topo_max, control_max] = slowest(world, &t);
    let mut r = row("loop", size, batch * batches, &mut mpi_max, &mut topo_max, &control_max);
    (r.route, r.untimed_calls) = (roots.route(world, size)?, untimed);
    Ok(r)
}

/// Per entry, the slowest rank's value of each series.
fn slowest(world: &mpi::topology::SimpleCommunicator, t: &[Vec<f64>; 3]) -> [Vec<f64>; 3] {
    std::array::from_fn(|k| {
        let mut max = vec![0.0f64; t[k].len()];
        world.all_reduce_into(&t[k][..], &mut max[..], SystemOperation::max());
        max
    })
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
    use super::{median_ci, order, sweep_sizes, verdict};

    #[test]
    fn the_median_interval_narrows_with_samples_and_decides_the_verdict() {
        let v: Vec<f64> = (0..200).map(|i| 0.9 + 0.001 * i as f64).collect();
        let [lo, hi] = median_ci(&v);
        // Order statistics 86 and 113 of 200.
        assert_eq!([lo, hi], [v[86], v[113]]);
        assert!(lo < 0.9995 && hi > 0.9995);
        assert_eq!(median_ci(&v[..3]), [v[0], v[2]]);
        assert_eq!(median_ci(&[1.0]), [1.0, 1.0]);
        assert_eq!(verdict([0.98, 1.02]), "met");
        assert_eq!(verdict([1.031, 1.2]), "NOT met");
        assert_eq!(verdict([0.99, 1.05]), "within noise");
    }

    #[test]
    fn every_kind_takes_every_position_equally_often() {
        let mut seen = [[0; 3]; 3];
        for it in 0..6 {
            for (pos, k) in order(it).into_iter().enumerate() {
                seen[k as usize][pos] += 1;
            }
        }
        assert_eq!(seen, [[2; 3]; 3]);
    }

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
