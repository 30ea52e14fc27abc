//! Choosing the broadcast plan for one (topology, root, message size).
//!
//! [`plan_broadcast`] is what the runtime calls (on every rank, once per root and size class:
//! planning is deterministic, so every rank computes the same plan without communicating): with
//! [`Algorithm::Auto`] it builds the candidates, predicts each one's completion time, and
//! returns the fastest, with [`PlanInfo`](crate::plan::PlanInfo) filled in.
//!
//! The three steps are three modules, so each can be read (and changed) alone:
//!
//! | module | what |
//! |---|---|
//! | [`candidates`] | the plans considered: optimal, greedy, trees, segmented families at their segment counts |
//! | [`predict`] | [`PlanPredictor`], the one interface every predicted time goes through (simulator, cost-model replay, analytic estimate) |
//! | [`rank`] | which candidates are worth simulating, the MPI baselines beside them, the choice |
//!
//! This file holds the options, the report types and [`plan_detailed`], which runs the three
//! steps and fills in the chosen plan's [`PlanInfo`](crate::plan::PlanInfo).
//!
//! Determinism and cost: every choice depends only on the inputs (no timers: the optimal search
//! runs under a node limit, predictions under a message limit), ties go to the earlier
//! candidate. Planning work is bounded by the optimal search's node limit (16 ranks or fewer),
//! greedy schedules only up to 64 ranks, O(candidates x ranks x depth) for the analytic
//! ranking, and at most `(unsegmented candidates) x ranks` simulated messages plus
//! [`PREDICT_MESSAGE_LIMIT`] for each simulated segmented candidate (the
//! [`SIMULATED_FAMILIES`] best estimates, and one more each time an estimate wins) and for
//! each MPI baseline its bound does not rule out. Each baseline is built and bounded in
//! O(messages x depth); scatter + ring (n (n - 1) messages) is not built beyond the message
//! limit, and is then bounded analytically. Measured on this project's 2-core machine
//! (`examples/bench_plan.rs`; shared, so they vary by tens of percent): 0.02 s at 256 ranks for
//! 64 KiB and 0.15 s for 4 MiB; 0.2-0.6 s at 4,096 ranks, 0.6-0.9 s where scatter + recursive
//! doubling must be simulated (ranks round-robin over hosts, 64 KiB: it wins there). The
//! runtime plans communicators above [`crate::plan::local::FULL_CHOOSER_MAX_RANKS`] ranks with
//! [`crate::plan::local`] instead: analytic ranking only, each rank building its own ops.

pub mod candidates;
pub mod predict;
pub mod rank;

pub use candidates::{segment_counts, AUTO_GREEDY_MAX_RANKS, AUTO_NODE_LIMIT, AUTO_OPTIMAL_MAX_RANKS};
pub use predict::{planning_sim_options, PlanPredictor, Prediction, Predictor};
pub use rank::{BASELINE_MARGIN, PREDICT_MESSAGE_LIMIT, SIMULATED_FAMILIES, VARIANT_MESSAGE_LIMIT};

use super::cost::CostModel;
use super::cost_replay::SegTransfer;
use super::error::PlanningError;
use super::registry::Algorithm;
use super::Plan;
use crate::topology::Topology;
use std::time::{Duration, Instant};

/// Options of [`plan_broadcast`].
#[derive(Clone, Debug)]
pub struct PlanOptions {
    pub algorithm: Algorithm,
    /// Time limit of an explicitly requested optimal search (anytime; not used by `auto`).
    pub time_limit: Option<Duration>,
    /// Node limit of the optimal search (deterministic).
    pub node_limit: Option<u64>,
    /// Force the number of segments of segmented algorithms.
    pub segments: Option<u32>,
    pub predictor: Predictor,
    /// CPU time per message (seconds; LogP's `o`): the simulator spaces a rank's sends by it
    /// and segment counts trade it against pipeline depth. The runtime passes what it measured
    /// between two hosts; [`MESSAGE_OVERHEAD_S`](super::pipeline::MESSAGE_OVERHEAD_S) otherwise.
    pub message_overhead_s: f64,
}

impl Default for PlanOptions {
    fn default() -> Self {
        PlanOptions {
            algorithm: Algorithm::Auto,
            time_limit: None,
            node_limit: Some(AUTO_NODE_LIMIT),
            segments: None,
            predictor: Predictor::Auto,
            message_overhead_s: super::pipeline::MESSAGE_OVERHEAD_S,
        }
    }
}

/// One candidate's predicted time.
#[derive(Clone, Debug, PartialEq)]
pub struct Evaluated {
    pub name: String,
    pub predicted_s: f64,
    /// `simulator`, `cost-model` or `analytic`; for MPI baselines not simulated, `lower bound`
    /// (the simulator would give at least `predicted_s`, no better than the choice) or `lower
    /// bound; too large to simulate` (the plan exceeds [`PREDICT_MESSAGE_LIMIT`] messages).
    pub by: &'static str,
}

/// A chosen plan with the details the CLI reports.
#[derive(Clone, Debug)]
pub struct Planned {
    pub plan: Plan,
    /// Predicted timing of every message of the plan (cost-model replay; empty for very large
    /// plans).
    pub timing: Vec<SegTransfer>,
    /// Every candidate considered, in the order considered.
    pub evaluated: Vec<Evaluated>,
    /// Which predictor gave the chosen plan's time.
    pub predicted_by: &'static str,
    /// Wall time spent planning (seconds).
    pub planning_time_s: f64,
    /// The exact search, when it ran: (proven, nodes explored, search time in seconds).
    pub search: Option<(bool, u64, f64)>,
    /// For a [Hourai2004] schedule (optimal, greedy): its time under that model, which assumes each
    /// transfer waits for room; the prediction above runs the plan with non-blocking sends.
    pub model_time_s: Option<f64>,
}

/// The plan for a broadcast of `bytes` from `root` on `topo` (rank leaves 0..n-1 are the
/// communicator's ranks).
pub fn plan_broadcast(topo: &Topology, root: u32, bytes: u64, opts: &PlanOptions) -> Result<Plan, PlanningError> {
    plan_detailed(topo, root, bytes, opts).map(|p| p.plan)
}

/// [`plan_broadcast`] with the candidates' predictions and the chosen plan's message timing.
pub fn plan_detailed(topo: &Topology, root: u32, bytes: u64, opts: &PlanOptions) -> Result<Planned, PlanningError> {
    let start = Instant::now();
    let n = topo.num_ranks();
    if n == 0 {
        return Err(PlanningError::NoRanks);
    }
    if root as usize >= n {
        return Err(PlanningError::RootOutOfRange { root, nranks: n });
    }
    let model = CostModel::new(topo, bytes);
    let lower_bound = super::bound::pipelined_lower_bound(topo, root, bytes);
    if n == 1 || bytes == 0 {
        let mut plan = Plan::empty(n as u32, root, "none");
        plan.info.planned_bytes = bytes;
        plan.info.predicted_time_s = Some(0.0);
        plan.info.lower_bound_s = Some(lower_bound);
        return Ok(Planned {
            plan,
            timing: Vec::new(),
            evaluated: Vec::new(),
            predicted_by: "none",
            planning_time_s: start.elapsed().as_secs_f64(),
            search: None,
            model_time_s: None,
        });
    }
    let overhead = if opts.message_overhead_s.is_finite() && opts.message_overhead_s >= 0.0 {
        opts.message_overhead_s
    } else {
        super::pipeline::MESSAGE_OVERHEAD_S
    };
    let (cands, search) = candidates::candidates(topo, &model, root, bytes, opts, overhead)?;
    let predictor = PlanPredictor::new(topo, &model, bytes, overhead, opts.predictor);
    let with_baselines = opts.algorithm == Algorithm::Auto && opts.predictor == Predictor::Auto;
    let choice = rank::choose(&cands, &predictor, topo, root, bytes, with_baselines);
    let i = choice.index;
    let evaluated = choice.evaluated;
    let (t, by) = (evaluated[i].predicted_s, evaluated[i].by);
    let (mut plan, model_time) = match choice.baseline_plan {
        Some(p) => (p, None),
        None => {
            let chosen = &cands[i];
            (chosen.plan(topo, root, bytes), chosen.model_time)
        }
    };
    let name = evaluated[i].name.clone();
    let timing = match choice.timing {
        Some(timing) => timing,
        None if plan.num_messages() > PREDICT_MESSAGE_LIMIT => Vec::new(),
        None => predictor.timing(&plan, by),
    };
    plan.info.algorithm = name;
    plan.info.predicted_time_s = Some(t);
    plan.info.planned_bytes = bytes;
    plan.info.lower_bound_s = Some(lower_bound);
    plan.info.library_time_s = evaluated
        .iter()
        .find(|e| e.name.starts_with("mpi:ompi"))
        .map(|e| e.predicted_s);
    if let Some((proven, nodes, secs)) = search {
        plan.info.nodes_explored = nodes;
        plan.info.search_time_s = secs;
        plan.info.proven_optimal = proven && plan.info.algorithm == "optimal";
    }
    Ok(Planned {
        plan,
        timing,
        evaluated,
        predicted_by: by,
        planning_time_s: start.elapsed().as_secs_f64(),
        search,
        model_time_s: model_time,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::gen::{Star, Tree as GenTree, TwoClusters};

    #[test]
    fn names_round_trip() {
        for s in [
            "auto",
            "optimal",
            "greedy",
            "hier",
            "dfs-binomial",
            "dfs-chain",
            "chain",
            "two-tree",
            "hier-pipeline",
            "binomial",
        ] {
            assert_eq!(s.parse::<Algorithm>().unwrap().to_string(), s);
        }
        assert_eq!(
            "k-chains:3".parse::<Algorithm>(),
            Ok(Algorithm::KChains { k: 3, segs: None })
        );
        assert_eq!(
            "k-chains".parse::<Algorithm>(),
            Ok(Algorithm::KChains { k: 2, segs: None })
        );
        assert!("k-chains:0".parse::<Algorithm>().is_err());
        assert!("fastest"
            .parse::<Algorithm>()
            .unwrap_err()
            .to_string()
            .contains("unknown algorithm"));
    }

    #[test]
    fn auto_small_is_proven_optimal_and_valid() {
        let t = TwoClusters::paper_nonuniform(3).build().unwrap();
        let p = plan_broadcast(&t, 0, 1 << 20, &PlanOptions::default()).unwrap();
        p.validate().unwrap();
        // Segmented candidates may win in the predictors; either way the info is filled in.
        assert!(p.info.predicted_time_s.unwrap() > 0.0);
        assert!(p.info.lower_bound_s.unwrap() <= p.info.predicted_time_s.unwrap());
        let o = PlanOptions {
            algorithm: Algorithm::Optimal,
            ..PlanOptions::default()
        };
        let q = plan_broadcast(&t, 0, 1 << 20, &o).unwrap();
        assert!(q.info.proven_optimal);
        assert_eq!(q.info.algorithm, "optimal");
    }

    #[test]
    fn auto_is_deterministic_and_bandwidth_aware() {
        let t = GenTree::oversubscribed(4, 4, 4.0).with_ranks(4).build().unwrap();
        let o = PlanOptions::default();
        let a = plan_broadcast(&t, 5, 4 << 20, &o).unwrap();
        let b = plan_broadcast(&t, 5, 4 << 20, &o).unwrap();
        assert_eq!(a.ops, b.ops);
        assert_eq!(a.info.algorithm, b.info.algorithm);
        a.validate().unwrap();
        // Long message: a segmented plan wins.
        assert!(a.nsegs > 1, "{}", a.info.algorithm);
        // Short message: unsegmented.
        let s = plan_broadcast(&t, 5, 1024, &o).unwrap();
        assert_eq!(s.nsegs, 1, "{}", s.info.algorithm);
    }

    /// `topo` with MPI rank r on the rank leaf that had rank `map[r]`.
    fn placed(topo: &Topology, map: &[u32]) -> Topology {
        let mut b = topo.to_builder();
        for v in &mut b.vertices {
            if let Some(leaf) = v.rank {
                let r = map.iter().position(|&m| m == leaf).expect("a permutation") as u32;
                v.rank = Some(r);
                v.name = format!("r{r}");
            }
        }
        b.build().unwrap()
    }

    #[test]
    fn auto_is_never_slower_than_an_mpi_baseline_beyond_the_margin() {
        use crate::plan::baselines::Baseline;
        use crate::sim::simulate_plan;
        // Small 2-level trees with 4:1 uplinks, ranks in block order and round-robin over hosts.
        let mut cases = Vec::new();
        for (hosts, switches, per) in [(4usize, 2usize, 2usize), (4, 4, 4)] {
            let base = GenTree::oversubscribed(hosts, switches, 4.0)
                .with_ranks(per)
                .build()
                .unwrap();
            let n = base.num_ranks();
            let nhosts = hosts * switches;
            let rr: Vec<u32> = (0..n).map(|r| ((r % nhosts) * per + r / nhosts) as u32).collect();
            cases.push(placed(&base, &rr));
            cases.push(base);
        }
        // The chooser's own model.
        let o = planning_sim_options(crate::plan::pipeline::MESSAGE_OVERHEAD_S);
        let mut baselines_won = 0;
        for topo in &cases {
            let n = topo.num_ranks() as u32;
            let ident: Vec<u32> = (0..n).collect();
            for root in [0, n - 1] {
                for bytes in [1000u64, 64 << 10, 1 << 20] {
                    let p = plan_detailed(topo, root, bytes, &PlanOptions::default()).unwrap();
                    p.plan.validate().unwrap();
                    let ours = simulate_plan(topo, &p.plan, bytes, &o).unwrap().time_s;
                    // The chooser's prediction is the simulated time of what it returns.
                    if p.predicted_by == "simulator" {
                        assert_eq!(p.plan.info.predicted_time_s, Some(ours));
                    }
                    assert!(p.evaluated.iter().filter(|e| e.name.starts_with("mpi:")).count() >= 3);
                    if p.plan.info.algorithm.starts_with("mpi:") {
                        baselines_won += 1;
                    }
                    for b in Baseline::all() {
                        let bp = b.build(topo, &ident, root, bytes).unwrap();
                        let theirs = simulate_plan(topo, &bp, bytes, &o).unwrap().time_s;
                        assert!(
                            ours <= theirs * (1.0 + BASELINE_MARGIN) * (1.0 + 1e-12),
                            "n={n} root={root} bytes={bytes}: {} {ours} slower than {b} {theirs} beyond the margin",
                            p.plan.info.algorithm
                        );
                    }
                }
            }
        }
        // Not an assertion: which baselines win depends on the model's parameters.
        eprintln!("baselines chosen in {baselines_won} cases");
    }

    /// The emulated 3x3 cluster as its start-up probe measured it (2026-11-28): 3 switches of 3
    /// hosts below a top switch, 300 Mbit/s uplinks, about 10 Gbit/s host links, one rank per
    /// host.
    fn probed_3x3() -> Topology {
        let mut v = vec![r#"{"id": "sw0", "kind": "switch"}"#.to_string()];
        let mut l = Vec::new();
        for s in 1..=3 {
            v.push(format!(r#"{{"id": "sw{s}", "kind": "switch"}}"#));
            l.push(format!(
                r#"{{"a": "sw{s}", "b": "sw0", "latency_us": 2.2, "bandwidth_gbps": 0.3}}"#
            ));
            for h in 0..3 {
                let r = (s - 1) * 3 + h;
                v.push(format!(r#"{{"id": "h{r}", "kind": "node"}}"#));
                v.push(format!(r#"{{"id": "r{r}", "kind": "rank", "rank": {r}}}"#));
                l.push(format!(
                    r#"{{"a": "h{r}", "b": "sw{s}", "latency_us": 4.4, "bandwidth_gbps": 10}}"#
                ));
                l.push(format!(
                    r#"{{"a": "r{r}", "b": "h{r}", "latency_us": 0.3, "bandwidth_gbps": 64}}"#
                ));
            }
        }
        let json = format!(r#"{{"vertices": [{}], "links": [{}]}}"#, v.join(","), l.join(","));
        crate::topology::json::from_str(&json, "3x3").unwrap()
    }

    /// A family's segment count is the simulator's choice among the counts next to its best
    /// analytic estimate, not the estimate's alone: on the probed 3x3 cluster at 16 KiB and
    /// 40 us per message, the estimate picked 4 segments for the pipelined hierarchical tree and
    /// the simulator put 2 ahead (in jobs, 2 ran a median of 367 us and 4 about 480 us).
    #[test]
    fn segment_counts_next_to_the_estimates_are_simulated() {
        let t = probed_3x3();
        let bytes = 16 << 10;
        let o = PlanOptions {
            message_overhead_s: 40e-6,
            ..PlanOptions::default()
        };
        let p = plan_detailed(&t, 0, bytes, &o).unwrap();
        let sim = |segs: u32| {
            let forced = PlanOptions {
                algorithm: Algorithm::HierPipeline { segs: None },
                segments: Some(segs),
                ..o.clone()
            };
            plan_detailed(&t, 0, bytes, &forced)
                .unwrap()
                .plan
                .info
                .predicted_time_s
                .unwrap()
        };
        let (two, four) = (sim(2), sim(4));
        assert!(
            two < four,
            "the simulator's ranking changed: 2 segments {two}, 4 {four}"
        );
        // Both counts were simulated, and the choice is no slower than either.
        for name in ["hier-pipeline:segs=2", "hier-pipeline:segs=4"] {
            let e = p.evaluated.iter().find(|e| e.name == name).expect(name);
            assert_eq!(e.by, "simulator", "{name}");
        }
        let chosen = p.plan.info.predicted_time_s.unwrap();
        assert!(
            chosen <= two,
            "{} predicted {chosen}, above 2 segments' {two}",
            p.plan.info.algorithm
        );
        // Every simulated segmented candidate's family had its neighbours simulated too.
        let simulated_families: Vec<&str> = p
            .evaluated
            .iter()
            .filter(|e| e.by == "simulator" && e.name.contains("segs="))
            .map(|e| e.name.rsplit_once("segs=").unwrap().0)
            .collect();
        for f in &simulated_families {
            assert!(
                simulated_families.iter().filter(|g| *g == f).count() >= 2,
                "{f}: one count simulated"
            );
        }
    }

    #[test]
    fn trivial_cases() {
        let t = Star::paper_star(1).build().unwrap();
        let p = plan_broadcast(&t, 0, 100, &PlanOptions::default()).unwrap();
        assert_eq!(p.num_messages(), 0);
        let t = Star::paper_star(4).build().unwrap();
        let p = plan_broadcast(&t, 2, 0, &PlanOptions::default()).unwrap();
        assert_eq!(p.num_messages(), 0);
        assert!(plan_broadcast(&t, 9, 10, &PlanOptions::default()).is_err());
    }
}
