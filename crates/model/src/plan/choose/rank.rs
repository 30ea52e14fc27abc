//! Ranking the candidates by their predicted times, and the MPI libraries' broadcasts beside
//! them.
//!
//! Why a module of its own: which predictions are worth making (a simulation costs far more
//! than an analytic estimate) and which plan wins are the chooser's policy, apart from both
//! the candidates and the model that predicts them.
//!
//! Segmented candidates are simulated only for the [`SIMULATED_FAMILIES`] best analytic
//! estimates, each with its family's variants at the neighbouring segment counts (those of at
//! most [`VARIANT_MESSAGE_LIMIT`] messages), and only if they have at most
//! [`PREDICT_MESSAGE_LIMIT`] messages; the others keep their analytic estimate. A candidate that wins on its analytic estimate alone is then
//! simulated (if within the limit) and the ranking redone, so the choice rests on the
//! simulator whenever it can.
//!
//! Then every MPI baseline of [`crate::plan::baselines`] (binomial, k-nomial, scatter + ring and
//! recursive-doubling allgather, Open MPI's fixed decision, HAN-like, ...; default
//! parameters), named `mpi:NAME`: a mature chooser must never pick a plan its own predictor
//! calls slower than one of the libraries' broadcasts, and on some trees one of them is the
//! best plan we have (scatter + recursive doubling with ranks placed round-robin over hosts:
//! its large exchanges stay inside hosts). Only with the simulator as predictor. They are
//! simulated only when a lower bound on their simulated time
//! ([`crate::plan::baselines::screen`]: link loads, the ring's chain of dependent steps) is
//! below the best prediction so far; otherwise they cannot win and are listed with that bound.
//! A baseline replaces our best candidate only if it is faster by [`BASELINE_MARGIN`].

use super::candidates::Candidate;
use super::predict::{PlanPredictor, Prediction};
use super::Evaluated;
use crate::plan::baselines::Baseline;
use crate::plan::cost_replay::SegTransfer;
use crate::plan::Plan;
use crate::topology::Topology;

/// Plans with more messages than this are ranked by the analytic estimate only.
pub const PREDICT_MESSAGE_LIMIT: usize = 600_000;
/// A segmented family's variants at the segment counts next to its best estimate's are
/// simulated only up to this many messages: on 256 ranks at 4 MiB (114,688 messages at the
/// best count, twice that at the next) simulating both variants took planning from 0.24 s to
/// 0.37 s without changing a plan of `examples/bench_plan.rs`; the variants matter where
/// per-message costs weigh most, on small plans.
pub const VARIANT_MESSAGE_LIMIT: usize = 16_384;
/// How many segmented candidates (best analytic estimates first) are simulated.
pub const SIMULATED_FAMILIES: usize = 2;
/// How much faster (relative) an MPI baseline must be predicted than our best candidate to be
/// chosen instead.
pub const BASELINE_MARGIN: f64 = 0.05;

/// `Evaluated::by` of a baseline that was not simulated: its time is at least the number shown.
const LOWER_BOUND: &str = "lower bound";

/// The outcome of the ranking.
pub(super) struct Choice {
    /// Every candidate's prediction in the order of `cands`, then the baselines'.
    pub(super) evaluated: Vec<Evaluated>,
    /// The chosen one's index in `evaluated`.
    pub(super) index: usize,
    /// The chosen baseline's plan, if a baseline was chosen (else the plan is `cands[index]`'s).
    pub(super) baseline_plan: Option<Plan>,
    /// The chosen plan's message timing, if its prediction recorded it.
    pub(super) timing: Option<Vec<SegTransfer>>,
}

/// Predict `cands` (not empty) with `predictor` and pick the fastest; with `with_baselines`, the
/// MPI baselines are ranked beside them.
pub(super) fn choose(
    cands: &[Candidate],
    predictor: &PlanPredictor,
    topo: &Topology,
    root: u32,
    bytes: u64,
    with_baselines: bool,
) -> Choice {
    // Segmented variants are simulated only for the SIMULATED_FAMILIES best analytic
    // estimates (and within the message limit); the rest keep their estimate.
    let mut by_estimate: Vec<(f64, usize)> = cands
        .iter()
        .enumerate()
        .filter(|(_, c)| c.variant_of.is_none())
        .filter_map(|(i, c)| c.estimate.map(|e| (e, i)))
        .collect();
    by_estimate.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let shortlist: Vec<usize> = by_estimate.iter().take(SIMULATED_FAMILIES).map(|x| x.1).collect();
    // A family's other segment counts are simulated with its best estimate's.
    let simulated = |i: usize| match cands[i].variant_of {
        Some(main) => shortlist.contains(&main) && cands[i].messages() <= VARIANT_MESSAGE_LIMIT,
        None => shortlist.contains(&i),
    };
    let mut evaluated: Vec<Evaluated> = Vec::new();
    // The timing of the best prediction so far, by candidate index.
    let mut kept: Option<(usize, Vec<SegTransfer>)> = None;
    let mut keep = |i: usize, timing: Option<Vec<SegTransfer>>, evaluated: &[Evaluated]| {
        if argmin(evaluated) == Some(i) {
            if let Some(t) = timing {
                kept = Some((i, t));
            }
        }
    };
    for (i, c) in cands.iter().enumerate() {
        let p = match c.estimate {
            Some(e) if c.messages() > PREDICT_MESSAGE_LIMIT || !simulated(i) => predictor.analytic(e),
            _ => predictor.predict(&c.plan(topo, root, bytes), c.estimate),
        };
        evaluated.push(Evaluated {
            name: c.name.clone(),
            predicted_s: p.time_s,
            by: p.by,
        });
        keep(i, p.timing, &evaluated);
    }
    // A winner known only by its analytic estimate is simulated when it can be (the estimate
    // may be optimistic), until the winner's time comes from the predictor or is too large
    // to simulate. At most once per candidate.
    let mut resimulated = vec![false; cands.len()];
    while let Some(i) = argmin(&evaluated) {
        if evaluated[i].by != "analytic" || cands[i].messages() > PREDICT_MESSAGE_LIMIT || resimulated[i] {
            break;
        }
        resimulated[i] = true;
        let p = predictor.predict(&cands[i].plan(topo, root, bytes), cands[i].estimate);
        evaluated[i].predicted_s = p.time_s;
        evaluated[i].by = p.by;
        keep(i, p.timing, &evaluated);
    }
    // The MPI libraries' broadcasts, ranked by the same simulator: the choice is never slower
    // in the simulator than any of them it can build.
    let own = evaluated.len();
    let mut baseline: Option<(usize, Plan)> = None;
    if with_baselines {
        if let Some((i, plan, timing)) = rank_baselines(topo, predictor, root, bytes, &mut evaluated) {
            keep(i, timing, &evaluated);
            baseline = Some((i, plan));
        }
    }
    // A baseline replaces our best candidate only when it wins clearly: the model is least sure
    // where plans differ most in shape (message counts, rendezvous-sized segments), and the
    // baselines are there to catch a candidate that is far off, not to trade a topology-aware
    // plan for a prediction a few percent better.
    let own_best = argmin(&evaluated[..own]).expect("candidates exist");
    let index = match &baseline {
        Some((j, _)) if evaluated[*j].predicted_s * (1.0 + BASELINE_MARGIN) < evaluated[own_best].predicted_s => *j,
        _ => own_best,
    };
    let baseline_plan = match baseline {
        Some((j, p)) if j == index => Some(p),
        _ => None,
    };
    let timing = match kept {
        Some((k, timing)) if k == index => Some(timing),
        _ => None,
    };
    Choice {
        evaluated,
        index,
        baseline_plan,
        timing,
    }
}

/// Index of the fastest prediction (ties go to the earlier candidate); predictions that are
/// only lower bounds of candidates left unsimulated never win.
fn argmin(evaluated: &[Evaluated]) -> Option<usize> {
    let mut best: Option<(f64, usize)> = None;
    for (i, e) in evaluated.iter().enumerate() {
        if e.by.starts_with(LOWER_BOUND) {
            continue;
        }
        if best.is_none_or(|(b, _)| e.predicted_s < b) {
            best = Some((e.predicted_s, i));
        }
    }
    best.map(|b| b.1)
}

/// Rank every MPI baseline of `plan::baselines` (default parameters, identity placement: the
/// topology's rank leaves are the communicator's ranks) against the best of `evaluated`, and
/// append each to `evaluated` as `mpi:NAME`. A baseline is simulated only if its lower bound
/// ([`crate::plan::baselines::screen`]) is below the best time so far — otherwise its simulated
/// time could not be lower — and if it has at most [`PREDICT_MESSAGE_LIMIT`] messages;
/// a plan identical to an earlier baseline's (Open MPI's fixed decision is one of the others)
/// reuses that result. Baselines that are invalid or need more segments than the size class
/// allows (the runtime could not run them) are left out. Returns the baseline that is now the
/// fastest of all, if one is: its index in `evaluated`, plan and predicted timing.
fn rank_baselines(
    topo: &Topology,
    predictor: &PlanPredictor,
    root: u32,
    bytes: u64,
    evaluated: &mut Vec<Evaluated>,
) -> Option<(usize, Plan, Option<Vec<SegTransfer>>)> {
    use crate::plan::baselines::screen;
    let n = topo.num_ranks() as u32;
    let ident: Vec<u32> = (0..n).collect();
    let max_segs = crate::plan::class_max_segments(crate::plan::size_class(bytes));
    let mut winner: Option<(usize, Plan, Option<Vec<SegTransfer>>)> = None;
    // Plans built so far with their (prediction, predictor).
    let mut seen: Vec<(Plan, f64, &'static str)> = Vec::new();
    for b in Baseline::all() {
        let best = argmin(evaluated).map_or(f64::INFINITY, |i| evaluated[i].predicted_s);
        let Ok(s) = screen::screen(&b, topo, &ident, root, bytes, PREDICT_MESSAGE_LIMIT) else {
            continue;
        };
        let name = format!("mpi:{b}");
        let Some(plan) = s.plan else {
            let by = if s.bound >= best {
                LOWER_BOUND
            } else {
                "lower bound; too large to simulate"
            };
            evaluated.push(Evaluated {
                name,
                predicted_s: s.bound,
                by,
            });
            continue;
        };
        if plan.nsegs > max_segs {
            continue;
        }
        if let Some((_, t, by)) = seen.iter().find(|(q, _, _)| q.nsegs == plan.nsegs && q.ops == plan.ops) {
            evaluated.push(Evaluated {
                name,
                predicted_s: *t,
                by,
            });
            continue;
        }
        let Prediction { time_s: t, by, timing } = if s.bound >= best {
            Prediction::without_timing(s.bound, LOWER_BOUND)
        } else {
            predictor.predict(&plan, None)
        };
        // The baselines' builders are tested, but a plan the chooser returns must run: the
        // one that would win is validated (once; validation is O(ranks x segments)).
        if t < best && by != LOWER_BOUND {
            if let Err(e) = plan.validate() {
                log::warn!("baseline {b} built an invalid plan ({e}); not a candidate");
                continue;
            }
        }
        evaluated.push(Evaluated {
            name,
            predicted_s: t,
            by,
        });
        let i = evaluated.len() - 1;
        if argmin(evaluated) == Some(i) {
            winner = Some((i, plan.clone(), timing));
        }
        seen.push((plan, t, by));
    }
    winner.filter(|w| argmin(evaluated) == Some(w.0))
}
