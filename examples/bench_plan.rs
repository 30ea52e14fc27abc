//! treecast's plans against the MPI libraries' broadcasts, in the flow simulator.
//!
//! `cargo run --release --example bench_plan [-- --quick]`
//!
//! Two-level trees with 4:1 oversubscribed uplinks (`topology::gen::Tree::oversubscribed`: 10
//! Gbit/s, 1 us host links; 1 us uplinks; shared memory inside hosts): 256 ranks (8 leaf
//! switches x 8 hosts x 4 ranks) and 4,096 ranks (16 x 16 x 16); 64 KiB and 4 MiB; MPI ranks
//! placed in block order (host by host) or round-robin over hosts. For each case: the plan
//! `plan_broadcast` chooses (algorithm `auto`) and the time it took to choose, its simulated
//! time, the lower bound max over receivers r of (latency(root, r) + bytes / bottleneck(root,
//! r)) and the ratio, then every baseline of `plan::baselines` simulated in the same run, as the
//! ratio baseline time / our time. `auto` ranks these baselines too (as `mpi:NAME`), so no ratio
//! falls below 1.00 unless the chosen plan was too large to simulate and was ranked by its
//! analytic estimate. Then the unsegmented heuristics at scale (hierarchical,
//! greedy, binomial in depth-first order; rank-order binomial for reference) against the
//! [Hourai2004] lower bound for unsegmented schedules.
//! `--quick` runs only the 256-rank cases.

use std::time::Instant;
use treecast::plan::baselines::Baseline;
use treecast::plan::bound::pipelined_lower_bound;
use treecast::plan::cost::CostModel;
use treecast::plan::cost_replay::replay;
use treecast::plan::greedy::{greedy_timeline, GreedyOptions};
use treecast::plan::hier::{dfs_binomial, hier_tree, unsegmented_lower_bound};
use treecast::plan::{plan_detailed, trees, Plan, PlanOptions};
use treecast::sim::{simulate_plan, SimOptions};
use treecast::topology::gen::Tree;
use treecast::topology::Topology;

/// The topology with MPI rank r on the leaf that had rank `map[r]`.
fn place(topo: &Topology, map: &[u32]) -> Topology {
    let mut inv = vec![0u32; map.len()];
    for (r, &leaf) in map.iter().enumerate() {
        inv[leaf as usize] = r as u32;
    }
    let mut b = topo.to_builder();
    for v in &mut b.vertices {
        if let Some(leaf) = v.rank {
            let r = inv[leaf as usize];
            v.rank = Some(r);
            v.name = format!("r{r}");
        }
    }
    b.build().expect("a relabelled tree is valid")
}

fn sim(topo: &Topology, plan: &Plan, bytes: u64) -> f64 {
    // The chooser's own model (per-message overhead, rendezvous above 64 KiB).
    let o = SimOptions {
        trusted_plan: true,
        ..treecast::plan::choose::planning_sim_options(treecast::plan::pipeline::MESSAGE_OVERHEAD_S)
    };
    simulate_plan(topo, plan, bytes, &o).expect("simulates").time_s
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let shapes: Vec<(usize, usize, usize)> = if quick {
        vec![(8, 8, 4)]
    } else {
        vec![(8, 8, 4), (16, 16, 16)]
    };
    let baselines = Baseline::all();
    let mut summary = Vec::new();
    let mut ratio_rows = Vec::new();
    let mut heuristic_rows = Vec::new();
    for &(switches, hosts, per) in &shapes {
        let base = Tree::oversubscribed(hosts, switches, 4.0)
            .with_ranks(per)
            .build()
            .expect("generator");
        let n = base.num_ranks();
        let nhosts = switches * hosts;
        // Unsegmented heuristics against the [Hourai2004] bound (block placement, 64 KiB).
        let bytes = 64u64 << 10;
        let model = CostModel::new(&base, bytes);
        let lb = unsegmented_lower_bound(&model, 0);
        let mut heur: Vec<(&str, Plan, f64)> = Vec::new();
        let t0 = Instant::now();
        let h = hier_tree(&model, 0);
        heur.push(("hier", Plan::from_tree(0, &h, 1, "hier"), t0.elapsed().as_secs_f64()));
        let t0 = Instant::now();
        let g = greedy_timeline(&model, 0, &GreedyOptions::default());
        let gp = treecast::plan::cost::timeline_to_plan(n as u32, &g, "greedy");
        heur.push(("greedy", gp, t0.elapsed().as_secs_f64()));
        let t0 = Instant::now();
        let d = dfs_binomial(&base, 0);
        heur.push((
            "dfs-binom",
            Plan::from_tree(0, &d, 1, "dfs-binomial"),
            t0.elapsed().as_secs_f64(),
        ));
        heur.push((
            "binomial",
            Plan::from_tree(0, &trees::binomial(n as u32, 0), 1, "binomial"),
            0.0,
        ));
        for (name, p, secs) in heur {
            let model_t = replay(&model, &p, bytes).expect("replays").makespan;
            heuristic_rows.push(format!(
                "{n:>5} {name:<9} {:>10.3} {:>10.3} {:>10.3} {:>8.2}x {:>9.3}",
                model_t * 1e3,
                sim(&base, &p, bytes) * 1e3,
                lb * 1e3,
                model_t / lb,
                secs
            ));
        }
        for placement in ["block", "round-robin"] {
            let map: Vec<u32> = (0..n as u32)
                .map(|r| {
                    if placement == "block" {
                        r
                    } else {
                        let (h, slot) = (r as usize % nhosts, r as usize / nhosts);
                        (h * per + slot) as u32
                    }
                })
                .collect();
            let topo = place(&base, &map);
            for bytes in [64u64 << 10, 4 << 20] {
                let t0 = Instant::now();
                let planned = plan_detailed(&topo, 0, bytes, &PlanOptions::default()).expect("plans");
                let plan_s = t0.elapsed().as_secs_f64();
                let ours = sim(&topo, &planned.plan, bytes);
                let lb = pipelined_lower_bound(&topo, 0, bytes);
                let mut ratios = Vec::new();
                for b in &baselines {
                    let ident: Vec<u32> = (0..n as u32).collect();
                    let p = b.build(&topo, &ident, 0, bytes).expect("baseline builds");
                    ratios.push((b.to_string(), sim(&topo, &p, bytes) / ours));
                }
                let best = ratios
                    .iter()
                    .min_by(|a, b| a.1.total_cmp(&b.1))
                    .cloned()
                    .expect("baselines");
                let binomial = ratios
                    .iter()
                    .find(|r| r.0 == "binomial")
                    .map(|r| r.1)
                    .unwrap_or(f64::NAN);
                let label = format!(
                    "{n:>5} {:>7} {:<11}",
                    if bytes >= 1 << 20 {
                        format!("{}MiB", bytes >> 20)
                    } else {
                        format!("{}KiB", bytes >> 10)
                    },
                    placement
                );
                summary.push(format!(
                    "{label} {:<34} {:>9.3} {:>9.3} {:>7.3} {:>8.3} {:>14} {:>7.2}x {:>8.2}x",
                    planned.plan.info.algorithm,
                    ours * 1e3,
                    lb * 1e3,
                    ours / lb,
                    plan_s,
                    best.0,
                    best.1,
                    binomial
                ));
                ratio_rows.push((label, ratios));
                eprintln!("done: {n} ranks, {bytes} bytes, {placement}");
            }
        }
    }
    println!("Simulated broadcast from rank 0 on 2-level trees with 4:1 uplinks (times in ms)");
    println!(
        "{:>5} {:>7} {:<11} {:<34} {:>9} {:>9} {:>7} {:>8} {:>14} {:>8} {:>9}",
        "ranks",
        "size",
        "placement",
        "our plan",
        "ours",
        "bound",
        "/bound",
        "plan s",
        "best MPI",
        "vs ours",
        "binomial"
    );
    for s in &summary {
        println!("{s}");
    }
    println!();
    println!("Every baseline: its simulated time / ours (higher = we are faster)");
    if let Some((_, first)) = ratio_rows.first() {
        let names: Vec<String> = first.iter().map(|r| r.0.clone()).collect();
        print!("{:<25}", "case");
        for name in &names {
            print!(" {:>13}", name.split(':').next().unwrap_or(name));
        }
        println!();
        for (label, ratios) in &ratio_rows {
            print!("{:<25}", label.split_whitespace().collect::<Vec<_>>().join(" "));
            for r in ratios {
                print!(" {:>13.2}", r.1);
            }
            println!();
        }
    }
    println!();
    println!("Unsegmented heuristics, 64 KiB, block placement: cost-model ([Hourai2004]) and simulated times");
    println!("against the [Hourai2004] lower bound for unsegmented schedules (ms)");
    println!(
        "{:>5} {:<9} {:>10} {:>10} {:>10} {:>9} {:>9}",
        "ranks", "planner", "model", "simulated", "bound", "gap", "plan s"
    );
    for r in &heuristic_rows {
        println!("{r}");
    }
}
