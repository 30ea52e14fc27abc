//! Planning at cluster scale (issue 21): what one rank spends to plan a (root, size class),
//! today's chooser against the local planner, in the same run.
//!
//! `cargo run --release -p treecast-model --example bench_plan_scale [-- --quick]`
//!
//! Two-level trees with 4:1 oversubscribed uplinks (`topology::gen::Tree::oversubscribed`, 2
//! ranks per host): 256 ranks (8 leaf switches x 16 hosts), 1,024 (16 x 32), 4,096 (64 x 32, the
//! issue's) and 16,384 (128 x 64); 1 KiB, 64 KiB and 4 MiB. Per case:
//!
//! * **today**: `plan_detailed` (the chooser `auto`, simulator and all; the whole plan, as the
//!   runtime computed it on every rank), for a first root (0) and a new one (n/2 + 3);
//! * **local**: `plan::local::LocalPlanner` (made once per communicator: `orbits ms`) choosing
//!   and `LocalChoice::ops` for one rank: `first` for root 0 (the candidates compared), `new`
//!   for the other root (the same orbit here: the choice is reused, only its trees are built),
//!   `fresh` for that root without reuse (`plan::local::choose`);
//!
//! with the time per rank, the peak heap growth while planning (a counting allocator), the
//! ops the rank keeps, and each plan's predicted time over the lower bound
//! `pipelined_lower_bound`. Where the local plan is small enough (<= 600,000 messages) it is also
//! simulated (the chooser's simulator options): `sim/pred` is the check of its prediction, and
//! `vs today` its simulated time over today's (simulated too, same limit).
//!
//! Then the start-up of a communicator: the simulated prober + inference of the host tree
//! (`infer::infer`, batch strategy, lomax jitter) + ranks hung below their hosts + the first
//! plan, in CPU seconds of this thread, today's and local. `--quick` stops at 4,096 ranks.
//! Times are CPU time of this (single) thread, minimum of 3 runs (today's chooser: one run at
//! 16,384 ranks); the machine is shared.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use treecast_model::infer::{infer, with_ranks, InferOptions, Strategy};
use treecast_model::plan::choose::{planning_sim_options, PREDICT_MESSAGE_LIMIT};
use treecast_model::plan::local::{choose, LocalChoice, LocalPlanner};
use treecast_model::plan::pipeline::MESSAGE_OVERHEAD_S;
use treecast_model::plan::{plan_detailed, Plan, PlanOptions};
use treecast_model::probe::{NoiseModel, SimProber};
use treecast_model::sim::simulate_plan;
use treecast_model::topology::gen::Tree;
use treecast_model::topology::{LinkDir, Topology};

/// The system allocator, counting live bytes and their peak.
struct Counting;
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let live = LIVE.fetch_add(l.size(), Ordering::Relaxed) + l.size();
        PEAK.fetch_max(live, Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// CPU time of this thread (seconds).
fn cpu_seconds() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime only writes the timespec we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// `f`'s result, its CPU time (minimum over `reps` runs) and peak heap growth (bytes).
fn measure<T>(reps: usize, mut f: impl FnMut() -> T) -> (T, f64, usize) {
    let mut best = f64::INFINITY;
    let mut peak = 0;
    let mut out = None;
    for _ in 0..reps {
        let base = LIVE.load(Ordering::Relaxed);
        PEAK.store(base, Ordering::Relaxed);
        let c = cpu_seconds();
        let r = f();
        best = best.min(cpu_seconds() - c);
        peak = peak.max(PEAK.load(Ordering::Relaxed) - base);
        out = Some(r);
    }
    (out.expect("reps >= 1"), best, peak)
}

fn sim(topo: &Topology, plan: &Plan, bytes: u64) -> Option<f64> {
    if plan.num_messages() > PREDICT_MESSAGE_LIMIT {
        return None;
    }
    let o = planning_sim_options(MESSAGE_OVERHEAD_S);
    simulate_plan(topo, plan, bytes, &o).ok().map(|r| r.time_s)
}

fn mib(b: usize) -> f64 {
    b as f64 / (1 << 20) as f64
}

fn fmt_opt(x: Option<f64>, digits: usize) -> String {
    x.map_or("-".into(), |v| format!("{v:.digits$}"))
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let mut shapes = vec![(16usize, 8usize), (32, 16), (32, 64)];
    if !quick {
        shapes.push((64, 128));
    }
    println!(
        "{:>6} {:>6} | {:>27} {:>9} {:>9} {:>8} {:>9} {:>6} | {:>22} {:>7} {:>7} {:>7} {:>7} {:>7} {:>6} {:>6} {:>8} | {:>7} {:>7}",
        "ranks",
        "bytes",
        "today: algorithm",
        "first ms",
        "new ms",
        "peak MiB",
        "ops held",
        "T/LB",
        "local: algorithm",
        "orbits",
        "first",
        "new ms",
        "fresh",
        "peak",
        "ops",
        "T/LB",
        "sim/pred",
        "speedup",
        "vs today"
    );
    for &(hosts, switches) in &shapes {
        let topo = Tree::oversubscribed(hosts, switches, 4.0)
            .with_ranks(2)
            .build()
            .unwrap();
        let n = topo.num_ranks() as u32;
        let roots = [0u32, n / 2 + 3];
        // Today's chooser takes seconds per plan at 16,384 ranks: one run there. The local
        // planner's runs are short, so always the minimum of 3 (a shared machine).
        let reps = if n >= 16384 { 1 } else { 3 };
        let local_reps = 3;
        for bytes in [1u64 << 10, 64 << 10, 4 << 20] {
            let opts = PlanOptions::default();
            let today = |root: u32| measure(reps, || plan_detailed(&topo, root, bytes, &opts).unwrap());
            let (t0, t0_cpu, t0_peak) = today(roots[0]);
            let (_, t1_cpu, t1_peak) = today(roots[1]);
            // The rank that measures: one that receives (the last).
            let me = n - 1;
            let (_, orbits_cpu, _) = measure(local_reps, || LocalPlanner::new(&topo));
            // A fresh planner per run for the first root; the second root reuses its choice.
            let mut planner = None;
            let ((l0, ops), l0_cpu, l0_peak) = measure(local_reps, || {
                let lp = planner.insert(LocalPlanner::new(&topo));
                let c = lp.choose(&topo, roots[0], bytes, MESSAGE_OVERHEAD_S).unwrap();
                let ops = c.ops(&topo, me);
                (c, ops)
            });
            let lp = planner.expect("measured");
            let (_, l1_cpu, l1_peak) = measure(local_reps, || {
                let c = lp.choose(&topo, roots[1], bytes, MESSAGE_OVERHEAD_S).unwrap();
                c.ops(&topo, me)
            });
            let (_, fresh_cpu, _) = measure(local_reps, || {
                let c = choose(&topo, roots[1], bytes, MESSAGE_OVERHEAD_S).unwrap();
                c.ops(&topo, me)
            });
            let lb = l0.lower_bound_s;
            let today_pred = t0.plan.info.predicted_time_s.unwrap_or(f64::NAN);
            let (sim_local, sim_today) = if n <= 4096 {
                (sim(&topo, &l0.plan(&topo), bytes), sim(&topo, &t0.plan, bytes))
            } else {
                (None, None)
            };
            let held = t0.plan.num_messages() * 2;
            println!(
                "{:>6} {:>6} | {:>27} {:>9.1} {:>9.1} {:>8.1} {:>9} {:>6.3} | {:>22} {:>7.2} {:>7.2} {:>7.2} {:>7.2} {:>7.3} {:>6} {:>6.3} {:>8} | {:>6.0}x {:>7}",
                n,
                bytes,
                t0.plan.info.algorithm,
                t0_cpu * 1e3,
                t1_cpu * 1e3,
                mib(t0_peak.max(t1_peak)),
                held,
                today_pred / lb,
                l0.algorithm,
                orbits_cpu * 1e3,
                l0_cpu * 1e3,
                l1_cpu * 1e3,
                fresh_cpu * 1e3,
                mib(l0_peak.max(l1_peak)),
                ops.len(),
                l0.predicted_s / lb,
                fmt_opt(sim_local.map(|s| s / l0.predicted_s), 3),
                t1_cpu / l1_cpu,
                fmt_opt(sim_local.zip(sim_today).map(|(a, b)| a / b), 3),
            );
        }
    }
    println!(
        "\n(first/new ms: CPU per rank to plan a (root, size class), first root 0, new root n/2+3; local first includes\n\
         the orbits, new reuses the first root's choice, fresh chooses again; peak: heap growth\n\
         while planning; ops held: today every rank holds the whole plan (2 ops per message), local its own ops;\n\
         T/LB: predicted time over the lower bound; sim/pred: local plan simulated over its prediction;\n\
         speedup: today's new-root time over local's; vs today: local plan's simulated time over today's.)"
    );
    startup(&shapes);
}

/// Simulated prober + inference + ranks below hosts + the first plan, today's and local.
fn startup(shapes: &[(usize, usize)]) {
    println!("\nStart-up of a communicator (CPU s of one rank): probe + infer the host tree, then the first plan (4 MiB from rank 0)");
    println!(
        "{:>6} {:>6} {:>10} {:>12} {:>12} {:>10} {:>10}",
        "ranks", "hosts", "infer s", "today plan", "local plan", "today s", "local s"
    );
    let noise = NoiseModel::jitter("lomax:scale_us=2,alpha=1.5".parse().unwrap());
    for &(hosts, switches) in shapes {
        let t = Tree::oversubscribed(hosts, switches, 4.0)
            .with_ranks(2)
            .build()
            .unwrap();
        let rank_hosts: Vec<String> = (0..t.num_ranks() as u32)
            .map(|r| t.vertex(t.host_of_rank(r).unwrap()).name.clone())
            .collect();
        let (topo, infer_cpu, _) = measure(1, || {
            let mut prober = SimProber::new(&t, noise.clone(), 7).unwrap();
            let r = infer(
                &mut prober,
                &InferOptions {
                    strategy: Strategy::Batch,
                    seed: 7,
                    ..InferOptions::default()
                },
            )
            .unwrap();
            with_ranks(&r.topology, &rank_hosts, LinkDir::new(0.3e-6, 5e9)).unwrap()
        });
        let n = topo.num_ranks() as u32;
        let bytes = 4u64 << 20;
        let (_, today, _) = measure(1, || plan_detailed(&topo, 0, bytes, &PlanOptions::default()).unwrap());
        let (_, local, _) = measure(1, || {
            let c: LocalChoice = LocalPlanner::new(&topo)
                .choose(&topo, 0, bytes, MESSAGE_OVERHEAD_S)
                .unwrap();
            c.ops(&topo, n - 1)
        });
        println!(
            "{:>6} {:>6} {:>10.3} {:>12.3} {:>12.3} {:>10.3} {:>10.3}",
            n,
            hosts * switches,
            infer_cpu,
            today,
            local,
            infer_cpu + today,
            infer_cpu + local
        );
    }
}
