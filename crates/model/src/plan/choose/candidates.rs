//! The candidate plans of one (topology, root, message size), before any prediction.
//!
//! Why a module of its own: what the chooser considers is a question apart from how it
//! predicts and how it ranks; a newcomer adding a planner adds it here and nothing else changes.
//!
//! With [`Algorithm::Auto`]:
//! * unsegmented trees: the proven-optimal [Hourai2004] schedule for small communicators (a
//!   deterministic node budget, [`AUTO_OPTIMAL_MAX_RANKS`]), the greedy schedule
//!   ([`AUTO_GREEDY_MAX_RANKS`]), the hierarchical relay tree, the binomial tree over the
//!   depth-first order, and the rank-order binomial tree as a safety net;
//! * for messages of at least two minimum segments, segmented plans: the depth-first chain, the
//!   two-tree over hosts (chain or two-tree inside hosts), the pipelined hierarchical tree and
//!   k chains, each at a few segment counts around [`segment_count`]'s choice
//!   ([`segment_counts`]): the count with the best analytic estimate ([`Estimator`]), and the
//!   counts next to it as its variants, which the simulator judges beside it when it runs.
//!
//! Why the variants: the analytic estimate picks a family's count, but the simulator picks
//! between families. On the emulated 3x3 cluster's probed tree (16 KiB, 40-70 us per message)
//! the simulator put `hier-pipeline` at 2 segments 5-33% ahead of 4, while the estimate
//! chose 4 below about 45 us; in jobs, 2 segments ran a median of 367 us and 4 about 480 us
//! (40 jobs, 2026-11-28).
//!
//! An algorithm asked for by name yields only its own candidate. The MPI libraries' baselines
//! are not candidates here: [`super::rank`] ranks them after our own, and only with the
//! simulator.

use super::PlanOptions;
use crate::plan::baselines::Baseline;
use crate::plan::cost::{timeline_to_plan, CostModel};
use crate::plan::error::PlanningError;
use crate::plan::greedy::{greedy_timeline, GreedyOptions};
use crate::plan::hier::{dfs_binomial, hier_tree_on};
use crate::plan::optimal::{solve, OptimalOptions};
use crate::plan::pipeline::{
    access_bandwidth, depth, dfs_chain, host_two_trees_on, k_chains, plan_from_trees, segment_count, Estimator,
    HostScheme, Tree, MIN_SEGMENT_BYTES,
};
use crate::plan::registry::Algorithm;
use crate::plan::relay::Hierarchy;
use crate::plan::{trees, Plan};
use crate::topology::Topology;

/// Communicators up to this size get the exact search in `auto`.
pub const AUTO_OPTIMAL_MAX_RANKS: usize = 16;
/// The exact search's node budget in `auto` (deterministic; a few tens of ms).
pub const AUTO_NODE_LIMIT: u64 = 20_000;
/// Communicators up to this size get the greedy schedule in `auto`.
pub const AUTO_GREEDY_MAX_RANKS: usize = 64;

/// One plan the chooser may pick.
pub(super) struct Candidate {
    pub(super) name: String,
    body: Body,
    /// Analytic estimate (segmented candidates), to rank variants.
    pub(super) estimate: Option<f64>,
    /// The schedule's own time under the [Hourai2004] model (optimal and greedy schedules).
    pub(super) model_time: Option<f64>,
    /// For a segmented family at a count next to its best estimate's: the index of the
    /// candidate with that best estimate. Such a variant is simulated whenever that one is
    /// ([`super::rank`]).
    pub(super) variant_of: Option<usize>,
}

/// A candidate's plan, or the trees and segment count to build it from (built only when it is
/// simulated or chosen: a 4,096-rank plan in 512 segments has millions of ops).
enum Body {
    Plan(Plan),
    Trees(Vec<Tree>, u32),
}

impl Candidate {
    /// Messages of the candidate's plan, without building it.
    pub(super) fn messages(&self) -> usize {
        match &self.body {
            Body::Plan(p) => p.num_messages(),
            Body::Trees(trees, s) => {
                let k = trees.len().max(1);
                trees
                    .iter()
                    .map(|t| t.iter().map(Vec::len).sum::<usize>() * (*s as usize).div_ceil(k))
                    .sum()
            }
        }
    }
    /// The candidate's plan (built now for a segmented one).
    pub(super) fn plan(&self, topo: &Topology, root: u32, bytes: u64) -> Plan {
        match &self.body {
            Body::Plan(p) => p.clone(),
            Body::Trees(trees, s) => plan_from_trees(topo, root, trees, *s, bytes, &self.name),
        }
    }
}

/// The candidates in the order they are considered (ties in the ranking go to the earlier),
/// and the exact search's (proven, nodes explored, search time in seconds) when it ran.
pub(super) type Candidates = (Vec<Candidate>, Option<(bool, u64, f64)>);

/// The candidates of `opts.algorithm` for `bytes` from `root` on `topo` (at least two ranks,
/// `bytes > 0`); `overhead` is the per-message CPU time the segment counts are chosen for.
pub(super) fn candidates(
    topo: &Topology,
    model: &CostModel,
    root: u32,
    bytes: u64,
    opts: &PlanOptions,
    overhead: f64,
) -> Result<Candidates, PlanningError> {
    let n = topo.num_ranks();
    let mut cands: Vec<Candidate> = Vec::new();
    let mut search: Option<(bool, u64, f64)> = None;
    let algo = opts.algorithm;
    let auto = algo == Algorithm::Auto;
    let unsegmented = |name: &str, children: Vec<Vec<u32>>| Candidate {
        name: name.to_string(),
        body: Body::Plan(Plan::from_tree(root, &children, 1, name)),
        estimate: None,
        model_time: None,
        variant_of: None,
    };
    if algo == Algorithm::Optimal || auto && n <= AUTO_OPTIMAL_MAX_RANKS {
        let o = OptimalOptions {
            time_limit: if auto { None } else { opts.time_limit },
            node_limit: opts.node_limit.or(if auto { Some(AUTO_NODE_LIMIT) } else { None }),
            ..OptimalOptions::default()
        };
        let r = solve(topo, root, bytes, &o)?;
        search = Some((r.proven, r.nodes_explored, r.search_time_s));
        cands.push(Candidate {
            name: "optimal".into(),
            body: Body::Plan(timeline_to_plan(n as u32, &r.timeline, "optimal")),
            estimate: None,
            model_time: Some(r.timeline.makespan),
            variant_of: None,
        });
    }
    if algo == Algorithm::Greedy || auto && n <= AUTO_GREEDY_MAX_RANKS {
        let tl = greedy_timeline(model, root, &GreedyOptions::default());
        cands.push(Candidate {
            name: "greedy".into(),
            body: Body::Plan(timeline_to_plan(n as u32, &tl, "greedy")),
            estimate: None,
            model_time: Some(tl.makespan),
            variant_of: None,
        });
    }
    // The relay hierarchy and the hierarchical tree are shared by several candidates.
    let hierarchy = Hierarchy::new(topo, root);
    let mut hier: Option<Vec<Vec<u32>>> = None;
    let mut hier_of = || hier.get_or_insert_with(|| hier_tree_on(model, &hierarchy)).clone();
    if algo == Algorithm::Hier || auto {
        cands.push(unsegmented("hier", hier_of()));
    }
    if algo == Algorithm::DfsBinomial || auto {
        cands.push(unsegmented("dfs-binomial", dfs_binomial(topo, root)));
    }
    // The rank-order binomial tree: a safety net of `auto`, and the MPI libraries' algorithms
    // when one is asked for by name (built as the library builds it).
    const SAFETY_NET: Baseline = Baseline::Binomial { seg: 0 };
    if auto {
        cands.push(unsegmented(&SAFETY_NET.to_string(), trees::binomial(n as u32, root)));
    }
    if let Algorithm::Library(b) = algo {
        let ident: Vec<u32> = (0..n as u32).collect();
        let plan = b.build(topo, &ident, root, bytes)?;
        cands.push(Candidate {
            name: b.to_string(),
            body: Body::Plan(plan),
            estimate: None,
            model_time: None,
            variant_of: None,
        });
    }
    let segmentable = bytes >= 2 * MIN_SEGMENT_BYTES;
    // Each pipelined family as the algorithm that names it, with its trees.
    let families: Vec<(Algorithm, Vec<Tree>)> = {
        let mut f = Vec::new();
        let asked = |a: &Algorithm| std::mem::discriminant(a) == std::mem::discriminant(&algo);
        let want = |a: &Algorithm| asked(a) || auto && segmentable;
        let chain = Algorithm::DfsChain { segs: None };
        if want(&chain) {
            f.push((chain, vec![dfs_chain(topo, root)]));
        }
        for hosts in [HostScheme::Chain, HostScheme::TwoTree] {
            let a = Algorithm::TwoTree { hosts, segs: None };
            let explicit = matches!(algo, Algorithm::TwoTree { hosts: h, .. } if h == hosts);
            if explicit || auto && segmentable {
                let [t1, t2] = host_two_trees_on(topo, root, &hierarchy, hosts);
                f.push((a, vec![t1, t2]));
            }
        }
        let hp = Algorithm::HierPipeline { segs: None };
        if want(&hp) {
            f.push((hp, vec![hier_of()]));
        }
        if let Algorithm::KChains { k, .. } = algo {
            f.push((
                Algorithm::KChains { k, segs: None },
                vec![k_chains(topo, root, k as usize)],
            ));
        } else if auto && segmentable && n >= 8 {
            for k in [2u32, 4] {
                f.push((
                    Algorithm::KChains { k, segs: None },
                    vec![k_chains(topo, root, k as usize)],
                ));
            }
        }
        f
    };
    let forced_segments = algo.segments().or(opts.segments);
    for (family, trees_) in families {
        let est = Estimator::new(topo, root, &trees_, overhead);
        let counts = segment_counts(topo, root, &trees_, bytes, overhead, forced_segments);
        let estimates: Vec<f64> = counts.iter().map(|&s| est.at(s, bytes)).collect();
        let best = best_index(&estimates);
        let main = cands.len();
        // The best count first (ties in the ranking go to it), then its neighbours.
        let around = [
            Some(best),
            best.checked_sub(1),
            Some(best + 1).filter(|&i| i < counts.len()),
        ];
        for (k, i) in around.into_iter().flatten().enumerate() {
            cands.push(Candidate {
                name: family.with_segments(counts[i]).to_string(),
                body: Body::Trees(trees_.clone(), counts[i]),
                estimate: Some(estimates[i]),
                model_time: None,
                variant_of: (k > 0).then_some(main),
            });
        }
    }
    if cands.is_empty() {
        return Err(PlanningError::NoCandidate {
            algorithm: algo.to_string(),
        });
    }
    Ok((cands, search))
}

/// Index of the smallest of `estimates` (not empty; the first of equals).
fn best_index(estimates: &[f64]) -> usize {
    let mut best = 0;
    for (i, e) in estimates.iter().enumerate() {
        if *e < estimates[best] {
            best = i;
        }
    }
    best
}

/// The segment counts a pipelined family is tried at: `forced` if given, else a few counts
/// around [`segment_count`]'s choice for the trees' depth and the root's access bandwidth,
/// ascending.
pub fn segment_counts(
    topo: &Topology,
    root: u32,
    trees: &[Tree],
    bytes: u64,
    overhead: f64,
    forced: Option<u32>,
) -> Vec<u32> {
    let k = trees.len() as u32;
    let d = trees.iter().map(|t| depth(t, root)).max().unwrap_or(1);
    let bw = access_bandwidth(topo, root).min(1e15);
    let base = segment_count(bytes, d, bw, k, overhead);
    match forced {
        Some(s) => vec![s.max(k)],
        None => {
            let mut c: Vec<u32> = [base / 2, base, base * 2, base * 4]
                .into_iter()
                .map(|s| segment_count_clamped(bytes, s, k))
                .collect();
            c.sort_unstable();
            c.dedup();
            c
        }
    }
}

fn segment_count_clamped(bytes: u64, s: u32, k: u32) -> u32 {
    let by_size = (bytes / MIN_SEGMENT_BYTES).max(1) as u32;
    let cap = crate::plan::pipeline::MAX_SEGMENTS
        .min(crate::plan::class_max_segments(crate::plan::size_class(bytes)))
        .min(by_size)
        .max(k);
    // Below the rendezvous threshold where the cap allows (see `pipeline::segment_count`).
    let floor = (bytes.div_ceil(crate::plan::pipeline::RENDEZVOUS_BYTES) as u32).clamp(k, cap);
    let s = s.clamp(floor, cap);
    s.div_ceil(k) * k
}
