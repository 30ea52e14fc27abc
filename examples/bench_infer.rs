//! Topology inference: accuracy, probing cost and CPU time (issue 4).
//!
//! Targets, on the 4-cluster 256-host testbed with lomax jitter (scale 2 us, alpha 1.5) over
//! 20 seeds: exact leaf-switch partition in >= 95% of trials, shared-link error (fp + fn)
//! <= 1%, pairs measured <= 10%, virtual probe time <= 0.15 s ([Shirai2007]: 15 s). And 4,096 ranks
//! (256 hosts x 16) end to end through the simulated prober in <= 1 s of CPU.
//!
//! Baselines measured in the same run: the algorithm of [Shirai2007] as published (`Strategy::Paper`:
//! sequential insertion, every branch checked, `find_close_host` ten hosts ahead) and measuring
//! all pairs first (`Strategy::AllPairs`: n - 1 round-robin rounds).
//!
//! Two versions of the testbed are run. The shipped one follows the prose of [Shirai2007]: clusters 1
//! and 2 are 1 and 1.5 ms (one-way) from the core, so one round trip between them takes 5 ms
//! and one pair measurement (3 sets of >= 11 timed round trips, each set opened by an untimed
//! one, as the MPI prober does) at least 183 ms — more than the whole 0.15 s budget, whatever
//! the algorithm. The same testbed with its WAN links at 20 us (a
//! machine-room network, where the budget is meaningful) is the second.
//!
//! Run: `cargo run --release --example bench_infer [SEEDS]` (default 20). CPU times are process
//! CPU time, minimum of several runs (the machines are shared). `-- SEEDS families [FIRST
//! [LED]]` prints the far-apart families only, over seeds FIRST.. (default 1), with parts of
//! at least LED hosts led by their own leaders (default `infer::LED_PART_MIN_HOSTS`; 32 leads
//! every part of the 32-host families too, to see what grouping small parts together buys).

use std::time::Instant;
use treecast::infer::{infer, metrics, with_ranks, InferOptions, Strategy};
use treecast::probe::{NoiseModel, PingSpec, Prober, SimProber};
use treecast::topology::gen::Testbed;
use treecast::topology::{LinkDir, Topology};

fn cpu_seconds() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime only writes the timespec we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// The testbed with every link of 1 ms or more set to `wan_s` one-way.
fn testbed(ranks_per_host: usize, wan_s: Option<f64>) -> Topology {
    let t = Testbed {
        ranks_per_host,
        ..Testbed::default()
    }
    .build()
    .unwrap();
    let Some(wan) = wan_s else { return t };
    let mut b = t.to_builder();
    for l in &mut b.links {
        if l.ab.latency_s >= 1e-3 {
            l.ab.latency_s = wan;
            l.ba.latency_s = wan;
        }
    }
    b.build().unwrap()
}

struct Row {
    name: &'static str,
    e: metrics::Evaluation,
}

fn evaluate(t: &Topology, name: &'static str, opts: InferOptions, seeds: usize, queries: usize) -> Row {
    let noise = NoiseModel::jitter("lomax:scale_us=2,alpha=1.5".parse().unwrap());
    let e = metrics::evaluate(t, &noise, &opts, seeds, 1, queries).unwrap();
    Row { name, e }
}

fn print_rows(rows: &[Row]) {
    println!(
        "  {:<26} {:>6} {:>9} {:>9} {:>8} {:>7} {:>11} {:>11}",
        "strategy", "exact", "fp", "fn", "pairs", "rounds", "time mean", "time max"
    );
    for r in rows {
        let e = &r.e;
        println!(
            "  {:<26} {:>5.0}% {:>8.4}% {:>8.4}% {:>7.2}% {:>7.1} {:>9.4} s {:>9.4} s",
            r.name,
            100.0 * e.exact_partition_rate,
            100.0 * e.shared_link_fp_rate,
            100.0 * e.shared_link_fn_rate,
            100.0 * e.pairs_measured_fraction,
            e.rounds,
            e.virtual_probe_time_s,
            e.max_virtual_probe_time_s
        );
    }
    let batch = &rows[0].e;
    for r in rows[1..].iter().filter(|r| !r.name.contains("shuffled")) {
        println!(
            "  {} / batch: {:.1}x the virtual probe time, {:.1}x the rounds, {:.1}x the pairs",
            r.name,
            r.e.virtual_probe_time_s / batch.virtual_probe_time_s,
            r.e.rounds / batch.rounds,
            r.e.pairs_measured_fraction / batch.pairs_measured_fraction
        );
    }
}

fn verdict(e: &metrics::Evaluation) {
    let ok = |b: bool| if b { "ok" } else { "MISSED" };
    println!(
        "  targets: exact >= 95%: {}; fp + fn <= 1%: {}; pairs <= 10%: {}; time <= 0.15 s (mean {:.3}, max {:.3}): {}",
        ok(e.exact_partition_rate >= 0.95),
        ok(e.shared_link_fp_rate + e.shared_link_fn_rate <= 0.01),
        ok(e.max_pairs_measured_fraction <= 0.10),
        e.virtual_probe_time_s,
        e.max_virtual_probe_time_s,
        ok(e.max_virtual_probe_time_s <= 0.15)
    );
}

fn section(title: &str, t: &Topology, seeds: usize) -> metrics::Evaluation {
    println!("\n{title}");
    let hint = InferOptions::default();
    let rows = vec![
        evaluate(t, "batch (host-order hint)", hint.clone(), seeds, 100_000),
        evaluate(
            t,
            "batch, one tree (no graft)",
            InferOptions {
                far_rtt_s: Some(f64::INFINITY),
                ..hint.clone()
            },
            seeds,
            100_000,
        ),
        evaluate(
            t,
            "batch, shuffled order",
            InferOptions {
                locality_hint: false,
                ..hint.clone()
            },
            seeds,
            100_000,
        ),
        evaluate(
            t,
            "paper ([Shirai2007])",
            InferOptions {
                strategy: Strategy::Paper,
                ..hint.clone()
            },
            seeds,
            20_000,
        ),
        evaluate(
            t,
            "all pairs",
            InferOptions {
                strategy: Strategy::AllPairs,
                ..hint
            },
            seeds.min(5),
            20_000,
        ),
    ];
    print_rows(&rows);
    verdict(&rows[0].e);
    rows.into_iter().next().unwrap().e
}

/// The far-part families: `clusters` clusters of `hosts` hosts in all (leaves of 8 hosts), their
/// uplinks spread over `[lo, hi]` one-way (cluster-to-cluster latency lo+lo .. hi+hi), under
/// lomax and normal jitter. Prints, per family and noise, the exact leaf-switch partitions and
/// the virtual probe time with the far threshold found in the data (the default) and, side by
/// side in the same run, with the fixed 1 ms threshold used before; and whether the targets
/// (>= 95% exact, <= 0.15 s) hold for the default.
/// The far-apart families: (clusters, hosts, lowest and highest one-way uplink latency, s).
const FAMILY_SHAPES: [(usize, usize, f64, f64); 10] = [
    (2, 32, 0.05e-3, 1.25e-3),
    (2, 64, 0.05e-3, 0.05e-3),
    (2, 256, 1.25e-3, 1.25e-3),
    (3, 144, 0.125e-3, 0.3e-3),
    (4, 128, 0.05e-3, 1.25e-3),
    (4, 256, 0.5e-3, 1.25e-3),
    (5, 160, 0.05e-3, 0.2e-3),
    (6, 96, 0.05e-3, 1.25e-3),
    (8, 64, 0.05e-3, 1.25e-3),
    (8, 256, 0.05e-3, 1.25e-3),
];

fn families(seeds: usize, first: u64, led: usize) -> bool {
    use treecast::topology::gen::Clusters;
    println!("\nfar-apart families (clusters below a core over routed links; uplink one-way spread over the range):");
    println!(
        "  {:<44} {:<27} {:>6} {:>10} {:>10} {:>6} {:>9}  | fixed 1 ms: {:>5} {:>10}",
        "family", "noise", "exact", "time mean", "time max", "rounds", "far thr", "exact", "time max"
    );
    let shapes = FAMILY_SHAPES;
    let default = InferOptions {
        led_part_min_hosts: led,
        ..InferOptions::default()
    };
    let fixed = InferOptions {
        far_rtt_s: Some(1e-3),
        ..default.clone()
    };
    let mut all_ok = true;
    for (clusters, hosts, lo, hi) in shapes {
        let t = Clusters::spread(clusters, hosts, 8, lo, hi).build().unwrap();
        let name = format!(
            "{clusters} clusters, {hosts} hosts, {:.2}-{:.2} ms apart",
            2.0 * lo * 1e3,
            2.0 * hi * 1e3
        );
        for noise in [
            "lomax:scale_us=2,alpha=1.5",
            "normal:sd_us=2",
            "lomax:scale_us=5,alpha=1.2",
        ] {
            let model = NoiseModel::jitter(noise.parse().unwrap());
            // A family where inference fails outright is a row of the table, not the end of it.
            let (e, f) = match (
                metrics::evaluate(&t, &model, &default, seeds, first, 2_000),
                metrics::evaluate(&t, &model, &fixed, seeds, first, 2_000),
            ) {
                (Ok(e), Ok(f)) => (e, f),
                (Err(err), _) | (_, Err(err)) => {
                    all_ok = false;
                    println!("  {name:<44} {noise:<27} inference failed in a trial: {err}  MISSED");
                    continue;
                }
            };
            // The heavier Lomax (alpha 1.2: a one-way spike of 75 us or more in 3.6% of messages)
            // is printed as a stress row, outside the targets of issue 17.
            let stress = noise == "lomax:scale_us=5,alpha=1.2";
            let ok = e.exact_partition_rate >= 0.95 && e.max_virtual_probe_time_s <= 0.15;
            all_ok &= ok || stress;
            println!(
                "  {:<44} {:<27} {:>5.0}% {:>8.4} s {:>8.4} s {:>6.1} {:>6.0} us  | {:>16.0}% {:>8.4} s  {}",
                name,
                noise,
                100.0 * e.exact_partition_rate,
                e.virtual_probe_time_s,
                e.max_virtual_probe_time_s,
                e.rounds,
                e.far_rtt_s.map_or(f64::INFINITY, |s| s * 1e6),
                100.0 * f.exact_partition_rate,
                f.max_virtual_probe_time_s,
                match (ok, stress) {
                    (true, _) => "ok",
                    (false, true) => "(stress)",
                    (false, false) => "MISSED",
                }
            );
        }
    }
    println!(
        "  targets (every family, lomax 2 us / 1.5 and normal 2 us, threshold from the data: exact >= 95%, virtual probe time <= 0.15 s): {}",
        if all_ok { "met" } else { "NOT met" }
    );
    all_ok
}

fn main() {
    env_logger::Builder::from_env(env_logger::Env::default().filter_or("TREECAST_LOG", "warn")).init();
    let seeds: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(20);
    if std::env::args().nth(2).as_deref() == Some("families") {
        // A first seed other than 1 checks a change on trials it was not looked at on.
        let first: u64 = std::env::args().nth(3).and_then(|s| s.parse().ok()).unwrap_or(1);
        let led: usize = std::env::args()
            .nth(4)
            .and_then(|s| s.parse().ok())
            .unwrap_or(treecast::infer::LED_PART_MIN_HOSTS);
        families(seeds, first, led);
        return;
    }
    if std::env::args().nth(2).as_deref() == Some("summary") {
        let first: u64 = std::env::args().nth(3).and_then(|s| s.parse().ok()).unwrap_or(1);
        summary(seeds, first);
        return;
    }
    if std::env::args().nth(2).as_deref() == Some("trials") {
        let arg = |n: usize| std::env::args().nth(n);
        let family: usize = arg(3).and_then(|s| s.parse().ok()).expect("family index 0-9");
        let noise = arg(4).unwrap_or_else(|| "normal:sd_us=2".into());
        let first: u64 = arg(5).and_then(|s| s.parse().ok()).unwrap_or(1);
        let led: usize = arg(6)
            .and_then(|s| s.parse().ok())
            .unwrap_or(treecast::infer::LED_PART_MIN_HOSTS);
        family_trials(seeds, family, &noise, first, led);
        return;
    }
    println!("treecast inference benchmark: lomax jitter (scale 2 us, alpha 1.5), {seeds} seeds");

    let shipped = testbed(0, None);
    let p = SimProber::new(&shipped, NoiseModel::default(), 1).unwrap();
    let (c1, c2) = (p.host_vertex(0), p.host_vertex(64));
    let rtt12 = shipped.rtt(c1, c2);
    // Per set: the untimed opening round trip, the first timed one, `patience` more.
    let per_pair = PingSpec::default().sets * (PingSpec::default().patience + 2);
    let floor = per_pair as f64 * rtt12;
    section(
        "testbed-256 as shipped (clusters 1, 2 at 1 / 1.5 ms from the core):",
        &shipped,
        seeds,
    );
    println!(
        "  one cluster 1 - cluster 2 pair: {per_pair} round trips of {:.2} ms = {:.3} s noise-free under the protocol of [Shirai2007]; cut short as a far pair, 2 (opening + one) = {:.4} s",
        rtt12 * 1e3,
        floor,
        2.0 * rtt12
    );

    section(
        "testbed-256 with its WAN links at 20 us (same switches, machine-room distances):",
        &testbed(0, Some(20e-6)),
        seeds,
    );

    // 4,096 ranks end to end: ranks grouped by host (as MPI_Comm_split_type does), host tree
    // inferred through the simulated prober, ranks hung below their hosts again.
    println!("\n4,096 ranks (256 hosts x 16) end to end through the simulated prober:");
    let t = testbed(16, Some(20e-6));
    let rank_hosts: Vec<String> = (0..t.num_ranks() as u32)
        .map(|r| t.vertex(t.host_of_rank(r).unwrap()).name.clone())
        .collect();
    let noise = NoiseModel::jitter("lomax:scale_us=2,alpha=1.5".parse().unwrap());
    let run = |strategy: Strategy, reps: usize| {
        let mut best = (f64::INFINITY, f64::INFINITY);
        let mut out = None;
        for rep in 0..reps {
            let (c, w) = (cpu_seconds(), Instant::now());
            let mut prober = SimProber::new(&t, noise.clone(), 7 + rep as u64).unwrap();
            let r = infer(
                &mut prober,
                &InferOptions {
                    strategy,
                    seed: 7 + rep as u64,
                    ..InferOptions::default()
                },
            )
            .unwrap();
            let full = with_ranks(&r.topology, &rank_hosts, LinkDir::new(0.3e-6, 5e9)).unwrap();
            best = (best.0.min(cpu_seconds() - c), best.1.min(w.elapsed().as_secs_f64()));
            out = Some((full, prober.num_hosts(), r.stats.probe.distinct_pairs));
        }
        (best, out.unwrap())
    };
    let ((cpu, wall), (full, hosts, pairs)) = run(Strategy::Batch, 5);
    let ((cpu_all, wall_all), (_, _, pairs_all)) = run(Strategy::AllPairs, 2);
    let same = metrics::same_tree(&t, &full, 1.0).is_ok();
    let part = metrics::leaf_partition(&t).unwrap() == metrics::leaf_partition(&full).unwrap();
    println!(
        "  batch:     {} ranks on {hosts} hosts, {pairs} pairs measured, CPU {:.4} s (wall {:.4} s), leaf-switch partition exact: {part}, same shape: {same}",
        full.num_ranks(),
        cpu,
        wall
    );
    println!(
        "  all pairs: {pairs_all} pairs, CPU {:.4} s (wall {:.4} s); batch is {:.1}x faster in CPU",
        cpu_all,
        wall_all,
        cpu_all / cpu
    );
    println!("  target CPU <= 1 s: {}", if cpu <= 1.0 { "ok" } else { "MISSED" });
}

/// One trial of a far-apart family: the inference (or why it failed) and whether its
/// leaf-switch partition is the true one, with the groups it got that are not.
fn family_trial(
    t: &Topology,
    model: &NoiseModel,
    seed: u64,
    opts: &InferOptions,
) -> Result<(treecast::infer::Inferred, Vec<Vec<String>>), String> {
    let want = metrics::leaf_partition(t).unwrap();
    let mut prober = SimProber::new(t, model.clone(), seed ^ 0x005e_ed0f_9e0b).unwrap();
    let o = InferOptions { seed, ..opts.clone() };
    let r = infer(&mut prober, &o).map_err(|e| e.to_string())?;
    let wrong = metrics::leaf_partition(&r.topology)
        .unwrap()
        .into_iter()
        .filter(|g| !want.contains(g))
        .collect();
    Ok((r, wrong))
}

/// `bench_infer -- SEEDS trials FAMILY NOISE [FIRST] [LED]`: one row per trial of one far-apart
/// family (its index in the families table, 0-9), with the leaf groups a wrong trial got, so a
/// missed row can be traced to the trials that miss it.
fn family_trials(seeds: usize, family: usize, noise: &str, first: u64, led: usize) {
    use treecast::topology::gen::Clusters;
    let (clusters, hosts, lo, hi) = FAMILY_SHAPES[family];
    let t = Clusters::spread(clusters, hosts, 8, lo, hi).build().unwrap();
    let opts = InferOptions {
        led_part_min_hosts: led,
        ..InferOptions::default()
    };
    let model = NoiseModel::jitter(noise.parse().unwrap());
    for s in first..first + seeds as u64 {
        let (r, wrong) = match family_trial(&t, &model, s, &opts) {
            Ok(x) => x,
            Err(e) => {
                println!("  seed {s:>3}: failed: {e}");
                continue;
            }
        };
        let st = &r.stats;
        println!(
            "  seed {s:>3}: {} {:.4} s {:>3} rounds, far {:>5.0} us, merged {} relocated {} remeasured {}",
            if wrong.is_empty() { "exact" } else { "WRONG" },
            st.probe.ping_time_s(),
            st.probe.ping_rounds,
            st.far_rtt_s.map_or(f64::INFINITY, |x| x * 1e6),
            st.merged,
            st.relocated,
            st.remeasured
        );
        for g in &wrong {
            println!("      got {}", g.join(" "));
        }
    }
}

/// Trials in a goal row of issue 17: at most one wrong partition and none over 0.15 s.
const GOAL_ROW: usize = 20;

/// `bench_infer -- SEEDS summary [FIRST]`: every far-apart family under the two goal jitters,
/// SEEDS trials each from seed FIRST, summed up: exact partitions, mean and largest virtual
/// probe time, trials over 0.15 s, wrong trials, and the goal rows (consecutive runs of
/// [`GOAL_ROW`] trials, as `families` prints them) that meet the goal. Why: the goal is stated
/// per row of 20 trials, and a claim about it needs thousands of trials on seeds nobody tuned
/// on (`-- 1200 summary 401`: 24,000 trials, about 3 minutes).
fn summary(seeds: usize, first: u64) {
    use treecast::topology::gen::Clusters;
    println!("far-apart families, {seeds} trials each from seed {first}; rows of {GOAL_ROW} trials");
    println!(
        "{:<44} {:<28} {:>8} {:>9} {:>9} {:>6} {:>6} {:>10}",
        "family", "noise", "exact", "time mean", "time max", ">0.15", "wrong", "rows met"
    );
    let (mut rows_met, mut rows) = (0, 0);
    for noise in ["lomax:scale_us=2,alpha=1.5", "normal:sd_us=2"] {
        let model = NoiseModel::jitter(noise.parse().unwrap());
        let (mut over_all, mut wrong_all) = (0, 0);
        for &(clusters, hosts, lo, hi) in &FAMILY_SHAPES {
            let t = Clusters::spread(clusters, hosts, 8, lo, hi).build().unwrap();
            // (exact, seconds) per trial; a failed inference counts as wrong and slow.
            let trials: Vec<(bool, f64)> = (first..first + seeds as u64)
                .map(|s| match family_trial(&t, &model, s, &InferOptions::default()) {
                    Ok((r, wrong)) => (wrong.is_empty(), r.stats.probe.ping_time_s()),
                    Err(_) => (false, f64::INFINITY),
                })
                .collect();
            let n = trials.len().max(1) as f64;
            let exact = trials.iter().filter(|t| t.0).count();
            let over = trials.iter().filter(|t| t.1 > 0.15).count();
            let mean = trials.iter().map(|t| t.1).sum::<f64>() / n;
            let max = trials.iter().map(|t| t.1).fold(0.0, f64::max);
            let met = trials
                .chunks_exact(GOAL_ROW)
                .filter(|r| r.iter().filter(|t| !t.0).count() <= 1 && r.iter().all(|t| t.1 <= 0.15))
                .count();
            let nrows = trials.len() / GOAL_ROW;
            println!(
                "{:<44} {:<28} {:>7.2}% {:>7.4} s {:>7.4} s {:>6} {:>6} {:>5} / {:<4}",
                format!(
                    "{clusters} clusters, {hosts} hosts, {:.2}-{:.2} ms apart",
                    2.0 * lo * 1e3,
                    2.0 * hi * 1e3
                ),
                noise,
                100.0 * exact as f64 / n,
                mean,
                max,
                over,
                trials.len() - exact,
                met,
                nrows
            );
            over_all += over;
            wrong_all += trials.len() - exact;
            rows_met += met;
            rows += nrows;
        }
        println!(
            "  {noise}: {over_all} of {} trials over 0.15 s, {wrong_all} wrong",
            seeds * FAMILY_SHAPES.len()
        );
    }
    println!("  goal rows met: {rows_met} of {rows}");
}
