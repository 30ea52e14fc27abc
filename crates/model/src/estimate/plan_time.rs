//! Completion-time distribution of a broadcast plan when link latencies are random.
//!
//! [Kaishima2005] models a one-stage collective: the root sends to n receivers at once
//! and the time is `max_i L_i`. Our plans are multi-stage: a rank forwards after it received,
//! segments pipeline, sends of one rank are issued in order. Under the contention-free model of
//! `plan_dag` every send `i` takes `T_i = Σ_{links on its path} L_link +
//! bytes_i / bandwidth`, where each `L_link` is a random one-way latency (from the link's
//! [`LatencyFit`](crate::topology::LatencyFit), or a default model); a rank's arrival time is a
//! max-plus expression over the plan's dependency graph and the completion time is the maximum
//! over ranks.
//!
//! Two estimators:
//! - [`monte_carlo_plan_time`]: draws every latency and evaluates the graph exactly. Unbiased;
//!   its error is statistical (reported as a standard error). Latencies are drawn independently
//!   per transfer (the delay a message meets on a link is its own), or optionally once per link
//!   per call (a slow link is slow for everyone crossing it during that broadcast).
//! - [`analytic_plan_time`]: propagates distributions on a time grid (`grid`).
//!   A send's transfer time is the convolution of its links' latencies (independent draws); a
//!   delivery is its send's start convolved with its transfer time (exact: independent). The
//!   difficulty is the maxima — a send waiting for several events, and the completion as the
//!   maximum over ranks — because those events share upstream transfers and are therefore
//!   *dependent*. Two rules ([`MaxRule`]):
//!   - **Critical-path tree** (default): every event keeps only its critical predecessor (the
//!     latest one with mean latencies), so each rank's arrival is a sum along its critical
//!     path. The events then form a tree hanging from time 0, and the maximum over ranks is
//!     evaluated *exactly* bottom-up on that tree: below an event, different children share no
//!     transfer, so the product of their CDFs is correct, and the shared upstream part is
//!     added once (by convolution), not once per rank. For one-segment trees (and [Kaishima2005]'s
//!     one-stage pattern) this is exact up to the grid; for pipelines it ignores near-critical
//!     alternatives and underestimates (4% on a 16-rank, 8-segment chain in the tests).
//!   - **Independence**: product of CDFs at every maximum, treating all events as
//!     independent. Positively correlated events (siblings below one relay, segments of one
//!     pipeline) make the product stochastically *larger* than the true maximum: it
//!     overestimates — +14% for a 32-rank binomial tree with heavy-tailed uplinks, +40% for the
//!     chain above (the error compounds). Kept as the upper bracket.
//!
//!   The grid spans 0 to a pessimistic completion time (every latency at a far quantile, capped
//!   at 20x the mean-latency completion); heavier tails are clipped there and the clipped
//!   probability is reported ([`CompletionStats::clipped_mass`]). Means are exact under the
//!   rule (mean-preserving discretisation), quantiles good to about one grid step.
//!
//! [`predict_plan_time`] bundles what the runtime profiler needs: deterministic, Pareto and
//! normal predictions (mean, p50, p99, and per-rank means) for one plan, topology and size.

use super::grid::{self, Grid, Pmf};
use super::plan_dag::{send_paths, serialization, DeterministicTimes, PlanDag};
use super::{EstimateError, Marginal, NormalFit, Pareto, ParetoFit};
use crate::plan::Plan;
use crate::topology::{DirLink, Topology};
use crate::util::rng::Rng;
use std::collections::HashMap;

/// Which fitted model a link's latency follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LatencyFamily {
    /// Every link at its nominal `latency_s`.
    Deterministic,
    Pareto,
    Normal,
}

/// Tail index assumed for links that probing left without a fit (see [`LinkLatencies`]).
pub const DEFAULT_ALPHA: f64 = 10.0;

/// The random one-way latency of every directed link of a topology (seconds).
#[derive(Clone, Debug)]
pub struct LinkLatencies {
    /// Indexed by `2 * link + forward`.
    dist: Vec<Marginal>,
}

impl LinkLatencies {
    /// Latencies of `family` from each link's `latency_fit` (both directions share the fit; the
    /// degenerate cases of [Kaishima2005] apply: point mass for alpha = ∞ or sigma = 0, clipping for
    /// alpha <= 1). A link without a fit of that family, when `default_alpha` is given and its
    /// nominal latency `l` is positive, gets `Pareto(k = l, alpha)` (probing reports minimum
    /// RTTs, so `l` is the minimum) or, for the normal family, the normal with that Pareto's mean
    /// and variance (the matched pairs of [Kaishima2005]; needs alpha > 2); otherwise it stays fixed at `l`.
    pub fn from_topology(
        topo: &Topology,
        family: LatencyFamily,
        default_alpha: Option<f64>,
    ) -> Result<LinkLatencies, EstimateError> {
        if let Some(a) = default_alpha {
            if !(a.is_finite() && a > 1.0) {
                return Err(EstimateError::DefaultTailIndex(a));
            }
        }
        let mut dist = Vec::with_capacity(2 * topo.links().len());
        for link in topo.links() {
            for forward in [false, true] {
                let l = link.dir(forward).latency_s;
                let fit = link.latency_fit.unwrap_or_default();
                let m = match family {
                    LatencyFamily::Deterministic => Marginal::Point(l),
                    LatencyFamily::Pareto => match (fit.pareto, default_alpha) {
                        (Some((k, alpha)), _) => ParetoFit {
                            k,
                            alpha,
                            m: fit.samples.max(1) as usize,
                        }
                        .marginal(),
                        (None, Some(a)) if l > 0.0 => Marginal::Pareto(Pareto::new(l, a)?),
                        _ => Marginal::Point(l),
                    },
                    LatencyFamily::Normal => match (fit.normal, default_alpha) {
                        (Some((mu, sigma)), _) => NormalFit {
                            mu,
                            sigma,
                            m: fit.samples as usize,
                        }
                        .marginal(),
                        (None, Some(a)) if l > 0.0 && a > 2.0 => {
                            let mean = a * l / (a - 1.0);
                            let sd = l * (a / ((a - 1.0) * (a - 1.0) * (a - 2.0))).sqrt();
                            Marginal::Normal(super::Normal::new(mean, sd)?)
                        }
                        _ => Marginal::Point(l),
                    },
                };
                dist.push(m);
            }
        }
        Ok(LinkLatencies { dist })
    }

    pub fn get(&self, d: DirLink) -> &Marginal {
        &self.dist[2 * d.link + usize::from(d.forward)]
    }

    /// Override one direction of one link.
    pub fn set(&mut self, d: DirLink, m: Marginal) {
        self.dist[2 * d.link + usize::from(d.forward)] = m;
    }

    /// Number of directed links whose latency is random.
    pub fn random_links(&self) -> usize {
        self.dist.iter().filter(|m| !matches!(m, Marginal::Point(_))).count()
    }
}

/// How the analytic model combines events that wait for several others.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum MaxRule {
    /// Keep only the operand that is latest with mean latencies; evaluate the resulting tree of
    /// critical paths exactly (shared upstream transfers included). Exact for one-segment
    /// trees; underestimates pipelines slightly (near-critical alternatives are ignored).
    #[default]
    CriticalPath,
    /// Product of CDFs at every event and over ranks (independence assumed everywhere);
    /// overestimates whenever operands share upstream transfers.
    Independent,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AnalyticOptions {
    /// Grid points (the grid spans 0 ..= a pessimistic completion time).
    pub grid_points: usize,
    pub max_rule: MaxRule,
}

impl Default for AnalyticOptions {
    fn default() -> Self {
        AnalyticOptions {
            grid_points: 4096,
            max_rule: MaxRule::CriticalPath,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MonteCarloOptions {
    pub samples: usize,
    pub seed: u64,
    /// Draw each link's latency once per simulated call instead of once per transfer.
    pub per_call_link_draws: bool,
}

impl Default for MonteCarloOptions {
    fn default() -> Self {
        MonteCarloOptions {
            samples: 10_000,
            seed: 1,
            per_call_link_draws: false,
        }
    }
}

/// Summary of a completion-time distribution (seconds).
#[derive(Clone, Debug, PartialEq)]
pub struct CompletionStats {
    pub mean_s: f64,
    pub p50_s: f64,
    pub p99_s: f64,
    /// Per rank: mean time it holds the whole message.
    pub rank_mean_s: Vec<f64>,
    /// Directed links with a random latency in the model.
    pub random_links: usize,
    /// Analytic: probability that the completion lies at or beyond the grid's end (heavy tails
    /// are truncated there; use Monte Carlo when this is not small). 0 for Monte Carlo.
    pub clipped_mass: f64,
    /// Monte Carlo: standard error of `mean_s`. `None` for the analytic model.
    pub std_error_s: Option<f64>,
    /// Analytic: grid step (quantiles are good to about one step; means are exact up to the
    /// independence rule and clipping). 0 for Monte Carlo.
    pub resolution_s: f64,
}

/// A completion-time distribution from either estimator.
#[derive(Clone, Debug)]
pub struct PlanTimeDistribution {
    repr: Repr,
    stats: CompletionStats,
}

#[derive(Clone, Debug)]
enum Repr {
    Grid { grid: Grid, cdf: Vec<f64> },
    Samples(Vec<f64>),
}

impl PlanTimeDistribution {
    fn new(
        repr: Repr,
        rank_mean_s: Vec<f64>,
        random_links: usize,
        clipped_mass: f64,
        std_error_s: Option<f64>,
    ) -> Self {
        let repr_step = match &repr {
            Repr::Grid { grid, .. } => Some(grid.dt),
            Repr::Samples(_) => None,
        };
        let mut d = PlanTimeDistribution {
            repr,
            stats: CompletionStats {
                mean_s: 0.0,
                p50_s: 0.0,
                p99_s: 0.0,
                rank_mean_s,
                random_links,
                clipped_mass,
                std_error_s,
                resolution_s: match &repr_step {
                    Some(dt) => *dt,
                    None => 0.0,
                },
            },
        };
        d.stats.mean_s = match &d.repr {
            Repr::Grid { grid, cdf } => grid::mean_of_cdf(cdf, grid),
            Repr::Samples(s) => s.iter().sum::<f64>() / s.len() as f64,
        };
        d.stats.p50_s = d.quantile(0.5);
        d.stats.p99_s = d.quantile(0.99);
        d
    }

    /// Quantile of the completion time (`p` in (0, 1)).
    pub fn quantile(&self, p: f64) -> f64 {
        match &self.repr {
            Repr::Grid { grid, cdf } => grid::quantile_of_cdf(cdf, grid, p),
            Repr::Samples(s) => {
                // Linear interpolation between order statistics.
                let pos = p * (s.len() - 1) as f64;
                let i = pos.floor() as usize;
                let w = pos - i as f64;
                if i + 1 < s.len() {
                    s[i] * (1.0 - w) + s[i + 1] * w
                } else {
                    s[s.len() - 1]
                }
            }
        }
    }

    pub fn stats(&self) -> &CompletionStats {
        &self.stats
    }
}

/// Per send: the constant part of its transfer time and the random links it crosses.
struct Transfers {
    fixed: Vec<f64>,
    random: Vec<Vec<usize>>,
    /// Distinct random link distributions, indexed by the entries of `random`.
    dists: Vec<Marginal>,
}

fn transfers(topo: &Topology, dag: &PlanDag, paths: &[Vec<DirLink>], lat: &LinkLatencies) -> Transfers {
    let mut index: HashMap<usize, usize> = HashMap::new();
    let mut t = Transfers {
        fixed: Vec::with_capacity(dag.sends.len()),
        random: Vec::with_capacity(dag.sends.len()),
        dists: Vec::new(),
    };
    for (s, path) in dag.sends.iter().zip(paths) {
        let mut fixed = serialization(topo, path, s.bytes);
        let mut rand = Vec::new();
        for &d in path {
            match lat.get(d) {
                Marginal::Point(v) => fixed += v,
                m => {
                    let key = 2 * d.link + usize::from(d.forward);
                    let id = *index.entry(key).or_insert_with(|| {
                        t.dists.push(*m);
                        t.dists.len() - 1
                    });
                    rand.push(id);
                }
            }
        }
        t.fixed.push(fixed);
        t.random.push(rand);
    }
    t
}

fn prepare(
    topo: &Topology,
    plan: &Plan,
    bytes: u64,
    lat: &LinkLatencies,
) -> Result<(PlanDag, Transfers), EstimateError> {
    if lat.dist.len() != 2 * topo.links().len() {
        return Err(EstimateError::ForeignLatencies);
    }
    let dag = PlanDag::build(plan, bytes)?;
    let paths = send_paths(topo, plan, &dag)?;
    let tr = transfers(topo, &dag, &paths, lat);
    Ok((dag, tr))
}

/// Latency sampled at or above 0 (a normal model can propose negative values; they are clamped,
/// and the analytic model lumps that mass at 0 the same way).
fn draw(m: &Marginal, rng: &mut Rng) -> f64 {
    m.sample(rng).max(0.0)
}

/// Monte Carlo over the plan's dependency graph: exact up to sampling error.
pub fn monte_carlo_plan_time(
    topo: &Topology,
    plan: &Plan,
    bytes: u64,
    lat: &LinkLatencies,
    opts: &MonteCarloOptions,
) -> Result<PlanTimeDistribution, EstimateError> {
    if opts.samples < 2 {
        return Err(EstimateError::TooFewSamples);
    }
    let (dag, tr) = prepare(topo, plan, bytes, lat)?;
    let n = plan.nranks as usize;
    let mut rng = Rng::new(opts.seed);
    let mut completions = Vec::with_capacity(opts.samples);
    let mut rank_sum = vec![0.0; n];
    let (mut start, mut arrival) = (Vec::new(), Vec::new());
    let mut link_draw = vec![0.0; tr.dists.len()];
    for _ in 0..opts.samples {
        if opts.per_call_link_draws {
            for (v, m) in link_draw.iter_mut().zip(&tr.dists) {
                *v = draw(m, &mut rng);
            }
        }
        dag.evaluate(
            |i| {
                let mut t = tr.fixed[i];
                for &j in &tr.random[i] {
                    t += if opts.per_call_link_draws {
                        link_draw[j]
                    } else {
                        draw(&tr.dists[j], &mut rng)
                    };
                }
                t
            },
            &mut start,
            &mut arrival,
        );
        for (s, a) in rank_sum.iter_mut().zip(&arrival) {
            *s += a;
        }
        completions.push(arrival.iter().copied().fold(0.0, f64::max));
    }
    let m = opts.samples as f64;
    let mean = completions.iter().sum::<f64>() / m;
    let var = completions.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (m - 1.0);
    completions.sort_by(f64::total_cmp);
    Ok(PlanTimeDistribution::new(
        Repr::Samples(completions),
        rank_sum.into_iter().map(|s| s / m).collect(),
        tr.dists.len(),
        0.0,
        Some((var / m).sqrt()),
    ))
}

/// Semi-analytic completion-time distribution on a grid (see the module docs for the two
/// rules and the direction of their errors).
pub fn analytic_plan_time(
    topo: &Topology,
    plan: &Plan,
    bytes: u64,
    lat: &LinkLatencies,
    opts: &AnalyticOptions,
) -> Result<PlanTimeDistribution, EstimateError> {
    if opts.grid_points < 16 {
        return Err(EstimateError::TooFewGridPoints);
    }
    let (dag, tr) = prepare(topo, plan, bytes, lat)?;
    let n = plan.nranks as usize;
    // Mean-latency evaluation: picks critical operands, gives per-rank means, sizes the grid.
    let means: Vec<f64> = tr.dists.iter().map(|m| m.mean()).collect();
    let mean_transfer: Vec<f64> = (0..dag.sends.len())
        .map(|i| tr.fixed[i] + tr.random[i].iter().map(|&j| means[j]).sum::<f64>())
        .collect();
    let (mut start_mean, mut arrival_mean) = (Vec::new(), Vec::new());
    dag.evaluate(|i| mean_transfer[i], &mut start_mean, &mut arrival_mean);
    // Grid end: every latency at its (1 - eps) quantile, eps shared over all random traversals,
    // but at most 20x the mean-latency completion (heavier tails are clipped there and the
    // clipped probability is reported). A uniform grid must trade range for resolution.
    let traversals: usize = tr.random.iter().map(|r| r.len()).sum();
    let eps = 1e-5 / traversals.max(1) as f64;
    let highs: Vec<f64> = tr.dists.iter().map(|m| m.upper_quantile(eps)).collect();
    let (mut s_hi, mut a_hi) = (Vec::new(), Vec::new());
    dag.evaluate(
        |i| tr.fixed[i] + tr.random[i].iter().map(|&j| highs[j]).sum::<f64>(),
        &mut s_hi,
        &mut a_hi,
    );
    let mean_completion = arrival_mean.iter().copied().fold(0.0, f64::max);
    let pessimistic = a_hi.iter().copied().fold(0.0, f64::max);
    let t_end = pessimistic.min(20.0 * mean_completion).max(1.01 * mean_completion);
    if !(t_end.is_finite() && t_end > 0.0) {
        // Nothing takes any time (e.g. a single rank): the completion is 0.
        return Ok(PlanTimeDistribution::new(
            Repr::Samples(vec![0.0, 0.0]),
            vec![0.0; n],
            tr.dists.len(),
            0.0,
            None,
        ));
    }
    let g = Grid {
        dt: t_end / (opts.grid_points - 1) as f64,
        m: opts.grid_points,
    };
    let link_pmf: Vec<Pmf> = tr.dists.iter().map(|m| g.discretize(m).0).collect();
    let mut cache: HashMap<(Vec<usize>, u64), Pmf> = HashMap::new();
    let mut transfer = |i: usize| -> Pmf {
        let key = (tr.random[i].clone(), tr.fixed[i].to_bits());
        cache
            .entry(key)
            .or_insert_with(|| {
                let mut acc = g.point(tr.fixed[i]).0;
                for &j in &tr.random[i] {
                    acc = grid::convolve(&acc, &link_pmf[j], &g).0;
                }
                acc
            })
            .clone()
    };
    let done_mean: Vec<f64> = (0..dag.sends.len()).map(|i| start_mean[i] + mean_transfer[i]).collect();
    let (completion_cdf, rank_mean) = match opts.max_rule {
        MaxRule::Independent => forward_independent(&dag, &g, &mut transfer, &start_mean, &done_mean, n),
        MaxRule::CriticalPath => (
            backward_critical_tree(&dag, &g, &mut transfer, &start_mean, &done_mean),
            arrival_mean,
        ),
    };
    let clipped = 1.0 - completion_cdf[g.m - 2];
    Ok(PlanTimeDistribution::new(
        Repr::Grid {
            grid: g,
            cdf: completion_cdf,
        },
        rank_mean,
        tr.dists.len(),
        clipped,
        None,
    ))
}

/// Forward propagation with the product of CDFs at every event that waits for several others
/// and over ranks at the end. Returns the completion CDF and per-rank mean arrivals.
fn forward_independent(
    dag: &PlanDag,
    g: &Grid,
    transfer: &mut impl FnMut(usize) -> Pmf,
    start_mean: &[f64],
    done_mean: &[f64],
    n: usize,
) -> (Vec<f64>, Vec<f64>) {
    let mut consumers = vec![0u32; dag.sends.len()];
    for s in &dag.sends {
        for &d in &s.deps {
            consumers[d] += 1;
        }
    }
    let mut done: HashMap<usize, Pmf> = HashMap::new();
    let mut last_start: Vec<Option<Pmf>> = vec![None; n];
    let mut remaining: Vec<usize> = dag.deliveries.iter().map(|d| d.len()).collect();
    let mut rank_parts: Vec<Vec<(f64, Pmf)>> = vec![Vec::new(); n];
    let mut rank_mean = vec![0.0; n];
    let mut completion = vec![1.0; g.m];
    let zero = g.point(0.0).0;
    for (i, s) in dag.sends.iter().enumerate() {
        let from = s.from as usize;
        // Operands of the start time: previous send of this rank and undominated deliveries.
        let mut ops: Vec<(f64, Pmf)> = Vec::new();
        if let Some(p) = s.prev {
            ops.push((start_mean[p], last_start[from].take().expect("previous start kept")));
        }
        for &d in &s.deps {
            let pmf = if consumers[d] == 1 {
                done.remove(&d)
            } else {
                done.get(&d).cloned()
            };
            ops.push((done_mean[d], pmf.expect("delivery kept until consumed")));
        }
        let start = combine(ops, g, MaxRule::Independent).unwrap_or_else(|| zero.clone());
        let (delivered, _) = grid::convolve(&start, &transfer(i), g);
        last_start[from] = Some(start);
        let to = s.to as usize;
        if consumers[i] > 0 {
            done.insert(i, delivered.clone());
        }
        rank_parts[to].push((done_mean[i], delivered));
        remaining[to] -= 1;
        if remaining[to] == 0 {
            let arrival = combine(std::mem::take(&mut rank_parts[to]), g, MaxRule::Independent).expect("a delivery");
            rank_mean[to] = arrival.mean(g);
            for (c, f) in completion.iter_mut().zip(arrival.cdf()) {
                *c *= f;
            }
        }
    }
    (completion, rank_mean)
}

/// Keep only the critical operand of every event (latest with mean latencies): the events then
/// form a tree hanging from "time 0", and the completion time is the maximum over the tree's
/// paths. That maximum is computed exactly, bottom-up: the time from an event to the last
/// arrival below it is the maximum over its children of (edge time + the child's time-to-go),
/// and children's subtrees share no transfer, so their maxima are independent (products of
/// CDFs). Exact for one-segment trees; for pipelines it ignores near-critical alternatives.
fn backward_critical_tree(
    dag: &PlanDag,
    g: &Grid,
    transfer: &mut impl FnMut(usize) -> Pmf,
    start_mean: &[f64],
    done_mean: &[f64],
) -> Vec<f64> {
    // Node 0 = time 0; send i has node 1 + 2i (its start) and 2 + 2i (its delivery).
    let nodes = 1 + 2 * dag.sends.len();
    let mut parent = vec![0usize; nodes];
    for (i, s) in dag.sends.iter().enumerate() {
        let mut best: Option<(f64, usize)> = s.prev.map(|p| (start_mean[p], 1 + 2 * p));
        for &d in &s.deps {
            if best.is_none_or(|(t, _)| done_mean[d] > t) {
                best = Some((done_mean[d], 2 + 2 * d));
            }
        }
        parent[1 + 2 * i] = best.map_or(0, |(_, node)| node);
        parent[2 + 2 * i] = 1 + 2 * i;
    }
    // Time-to-go CDFs, folded into the parent's running product as children finish. Children
    // have larger ids than parents, so one reverse sweep sees every node after its children.
    let mut togo: Vec<Option<Vec<f64>>> = vec![None; nodes];
    for x in (1..nodes).rev() {
        let own = togo[x].take().unwrap_or_else(|| vec![1.0; g.m]); // a leaf: 0 to go
        let contribution = if x % 2 == 0 {
            // Delivery of send (x - 2) / 2: reached from its start after the transfer time.
            let own = grid::pmf_of_cdf(&own);
            grid::convolve(&own, &transfer((x - 2) / 2), g).0.cdf()
        } else {
            own
        };
        let slot = togo[parent[x]].get_or_insert_with(|| vec![1.0; g.m]);
        for (c, f) in slot.iter_mut().zip(&contribution) {
            *c *= f;
        }
    }
    togo[0].take().unwrap_or_else(|| vec![1.0; g.m])
}

/// The maximum of several event times under the chosen rule (`None` for no operands).
fn combine(mut ops: Vec<(f64, Pmf)>, g: &Grid, rule: MaxRule) -> Option<Pmf> {
    match ops.len() {
        0 => None,
        1 => ops.pop().map(|(_, p)| p),
        _ => match rule {
            MaxRule::Independent => Some(grid::max_independent(
                &ops.iter().map(|(_, p)| p).collect::<Vec<_>>(),
                g,
            )),
            MaxRule::CriticalPath => ops.into_iter().max_by(|a, b| a.0.total_cmp(&b.0)).map(|(_, p)| p),
        },
    }
}

/// Which estimator [`predict_plan_time`] uses.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PredictMethod {
    Analytic(AnalyticOptions),
    MonteCarlo(MonteCarloOptions),
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PredictOptions {
    /// Tail index for links without a fitted model (see [`LinkLatencies::from_topology`]);
    /// `None` keeps such links at their nominal latency.
    pub default_alpha: Option<f64>,
    pub method: PredictMethod,
}

impl Default for PredictOptions {
    fn default() -> Self {
        PredictOptions {
            default_alpha: Some(DEFAULT_ALPHA),
            method: PredictMethod::Analytic(AnalyticOptions::default()),
        }
    }
}

/// What the runtime profiler records per call site as "predicted time".
#[derive(Clone, Debug, PartialEq)]
pub struct PlanPrediction {
    /// Contention-free times with nominal latencies.
    pub deterministic: DeterministicTimes,
    pub pareto: CompletionStats,
    pub normal: CompletionStats,
}

/// Predicted time of `plan` on `topo` for `bytes`: deterministic, Pareto and normal models.
pub fn predict_plan_time(
    topo: &Topology,
    plan: &Plan,
    bytes: u64,
    opts: &PredictOptions,
) -> Result<PlanPrediction, EstimateError> {
    let deterministic = super::evaluate_deterministic(topo, plan, bytes)?;
    let run = |family| -> Result<CompletionStats, EstimateError> {
        let lat = LinkLatencies::from_topology(topo, family, opts.default_alpha)?;
        let d = match &opts.method {
            PredictMethod::Analytic(o) => analytic_plan_time(topo, plan, bytes, &lat, o)?,
            PredictMethod::MonteCarlo(o) => monte_carlo_plan_time(topo, plan, bytes, &lat, o)?,
        };
        Ok(d.stats)
    };
    Ok(PlanPrediction {
        deterministic,
        pareto: run(LatencyFamily::Pareto)?,
        normal: run(LatencyFamily::Normal)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimate::plan_dag::tests::two_level;
    use crate::estimate::MaxOf;
    use crate::plan::trees;
    use crate::topology::{LatencyFit, TopologyBuilder, VertexKind};

    fn mc(samples: usize, seed: u64) -> MonteCarloOptions {
        MonteCarloOptions {
            samples,
            seed,
            per_call_link_draws: false,
        }
    }

    /// Set every rank link (the link touching rank r) to `f(r)` in both directions.
    fn set_rank_links(t: &Topology, lat: &mut LinkLatencies, mut f: impl FnMut(u32) -> Marginal) {
        for r in 0..t.num_ranks() as u32 {
            let (_, l) = t.parent(t.rank_vertex(r)).unwrap();
            let m = f(r);
            for forward in [false, true] {
                lat.set(DirLink { link: l, forward }, m);
            }
        }
    }

    #[test]
    fn fixed_latencies_reproduce_the_deterministic_evaluator() {
        let t = two_level(3, 4, 1e-6, 4e-6);
        let plan = Plan::from_tree(0, &trees::binomial(12, 0), 1, "binomial");
        let det = crate::estimate::evaluate_deterministic(&t, &plan, 4096).unwrap();
        let lat = LinkLatencies::from_topology(&t, LatencyFamily::Deterministic, Some(5.0)).unwrap();
        assert_eq!(lat.random_links(), 0);
        let m = monte_carlo_plan_time(&t, &plan, 4096, &lat, &mc(10, 1)).unwrap();
        // (Equal up to the order of floating-point additions.)
        assert!((m.stats().mean_s - det.completion_s).abs() < 1e-12 * det.completion_s);
        assert!((m.stats().p99_s - det.completion_s).abs() < 1e-12 * det.completion_s);
        for (x, y) in m.stats().rank_mean_s.iter().zip(&det.rank_arrival_s) {
            assert!((x - y).abs() < 1e-12 * det.completion_s);
        }
        // The grid splits each fixed time between two points (mean kept); the final maximum
        // over ranks of such splits can be late by less than one grid step.
        let a = analytic_plan_time(&t, &plan, 4096, &lat, &AnalyticOptions::default()).unwrap();
        let dt = a.stats().resolution_s;
        let err = a.stats().mean_s - det.completion_s;
        assert!(err >= -1e-12 * det.completion_s && err < dt, "{err:e} vs step {dt:e}");
        for (x, y) in a.stats().rank_mean_s.iter().zip(&det.rank_arrival_s) {
            assert!((x - y).abs() < 1e-12 * det.completion_s);
        }
    }

    #[test]
    fn one_stage_plan_is_the_papers_max_of_shifted_paretos() {
        // Root 0 sends to 63 ranks at once (the one-stage collective of [Kaishima2005]). The root's own link
        // is fixed (c = 2 us: the shift of the multi-cluster model), each receiver's link is a
        // Pareto with its own parameters, drawn per transfer: arrivals are independent, so
        // E[completion] = E[max_j (c + ser + Pareto_j)] exactly, which MaxOf computes.
        let n = 64;
        let t = two_level(1, n, 2e-6, 0.0);
        let plan = Plan::from_tree(0, &trees::flat(n as u32, 0), 1, "flat");
        let mut lat = LinkLatencies::from_topology(&t, LatencyFamily::Deterministic, None).unwrap();
        let mut rng = Rng::new(3);
        let mut params = Vec::new();
        set_rank_links(&t, &mut lat, |r| {
            if r == 0 {
                Marginal::Point(2e-6)
            } else {
                let (k, a) = (1e-6 * (1.0 + rng.f64()), 3.0 + 10.0 * rng.f64());
                params.push((k, a));
                Marginal::Pareto(Pareto::new(k, a).unwrap())
            }
        });
        let bytes = 1000;
        let shift = 2e-6 + bytes as f64 / 1e9;
        let exact = MaxOf::from_marginals(
            &params
                .iter()
                .map(|&(k, a)| Marginal::Pareto(Pareto::new(k, a).unwrap().shifted(shift).unwrap()))
                .collect::<Vec<_>>(),
        )
        .distribution()
        .unwrap();
        let a = analytic_plan_time(&t, &plan, bytes, &lat, &AnalyticOptions::default()).unwrap();
        let rel = a.stats().mean_s / exact.expected_max() - 1.0;
        println!(
            "one-stage: analytic {:.6e} exact {:.6e} rel {rel:.2e}",
            a.stats().mean_s,
            exact.expected_max()
        );
        assert!(rel.abs() < 2e-3, "discretisation error {rel:e}");
        // Quantiles are interpolated between grid points: good to about one grid step.
        let dt = a.stats().resolution_s;
        assert!(dt > 0.0 && dt < 0.01 * exact.expected_max());
        for p in [0.5, 0.99] {
            let err = a.quantile(p) - exact.quantile(p);
            assert!(err.abs() < dt, "p={p}: error {err:e}, grid step {dt:e}");
        }
        let m = monte_carlo_plan_time(&t, &plan, bytes, &lat, &mc(20_000, 9)).unwrap();
        let se = m.stats().std_error_s.unwrap();
        assert!(
            (m.stats().mean_s - exact.expected_max()).abs() < 5.0 * se,
            "MC {} ± {se}",
            m.stats().mean_s
        );
    }

    /// Four switches of eight ranks; rank links Pareto(0.5 us, 12), uplinks Pareto(3 us, 4).
    fn cluster() -> (Topology, LinkLatencies) {
        let t = two_level(4, 8, 0.5e-6, 3e-6);
        let mut lat = LinkLatencies::from_topology(&t, LatencyFamily::Pareto, Some(4.0)).unwrap();
        set_rank_links(&t, &mut lat, |_| Marginal::Pareto(Pareto::new(0.5e-6, 12.0).unwrap()));
        (t, lat)
    }

    fn analytic(t: &Topology, plan: &Plan, bytes: u64, lat: &LinkLatencies, rule: MaxRule) -> PlanTimeDistribution {
        let o = AnalyticOptions {
            max_rule: rule,
            ..AnalyticOptions::default()
        };
        analytic_plan_time(t, plan, bytes, lat, &o).unwrap()
    }

    #[test]
    fn trees_against_monte_carlo() {
        // One-segment trees on 4 switches x 8 ranks with heavy-ish uplinks (alpha 4). The
        // critical-path tree is exact here (only grid discretisation remains); treating the
        // ranks as independent double-counts the shared uplinks and overestimates.
        // Measured (20,000 samples): binomial MC 2.278e-5 ± 0.1%, tree rule -0.09%, independence
        // +13.5%; 4-ary: -0.25% for both (within 4 standard errors; little is shared there).
        let (t, lat) = cluster();
        for (name, children) in [("binomial", trees::binomial(32, 0)), ("kary4", trees::kary(32, 0, 4))] {
            let plan = Plan::from_tree(0, &children, 1, name);
            let m = monte_carlo_plan_time(&t, &plan, 256, &lat, &mc(20_000, 5)).unwrap();
            let a = analytic(&t, &plan, 256, &lat, MaxRule::CriticalPath);
            let ind = analytic(&t, &plan, 256, &lat, MaxRule::Independent);
            let (ms, se) = (m.stats().mean_s, m.stats().std_error_s.unwrap());
            let rel = a.stats().mean_s / ms - 1.0;
            let rel_ind = ind.stats().mean_s / ms - 1.0;
            println!(
                "{name}: MC {ms:.4e} ± {se:.1e}; tree rule {:.4e} ({rel:+.2e}); independent {:.4e} ({rel_ind:+.2e}); \
                 p99 MC {:.4e} tree {:.4e}",
                a.stats().mean_s,
                ind.stats().mean_s,
                m.stats().p99_s,
                a.stats().p99_s
            );
            assert!((a.stats().mean_s - ms).abs() < 4.0 * se + 2e-3 * ms, "{name}: {rel:e}");
            assert!((a.stats().p99_s / m.stats().p99_s - 1.0).abs() < 0.02, "{name} p99");
            assert!(
                ind.stats().mean_s > ms - 4.0 * se,
                "{name}: independence must not underestimate"
            );
            // Per-rank means are exact path sums: within Monte Carlo noise.
            for (r, (x, y)) in a.stats().rank_mean_s.iter().zip(&m.stats().rank_mean_s).enumerate() {
                assert!((x - y).abs() < 0.01 * y.max(1e-9), "{name} rank {r}: {x} vs {y}");
            }
        }
    }

    #[test]
    fn pipelines_are_bracketed_by_the_two_rules() {
        // A pipelined chain: segment k at rank r waits for segment k-1's send there and for its
        // own arrival, two correlated events. The critical-path tree ignores the near-critical
        // one (underestimates); independence everywhere overestimates. Monte Carlo lies between.
        // Measured (16 ranks on 2 switches, 8 segments): critical path -4.2%, independence +40%
        // (it compounds along the chain) — which is why the tree rule is the default.
        let t = two_level(2, 8, 0.5e-6, 3e-6);
        let mut lat = LinkLatencies::from_topology(&t, LatencyFamily::Pareto, Some(4.0)).unwrap();
        set_rank_links(&t, &mut lat, |_| Marginal::Pareto(Pareto::new(0.5e-6, 12.0).unwrap()));
        let plan = Plan::from_tree(0, &trees::rank_chain(16, 0), 8, "chain");
        let bytes = 8 * 4096;
        let m = monte_carlo_plan_time(&t, &plan, bytes, &lat, &mc(10_000, 7)).unwrap();
        let crit = analytic(&t, &plan, bytes, &lat, MaxRule::CriticalPath);
        let indep = analytic(&t, &plan, bytes, &lat, MaxRule::Independent);
        let (ms, se) = (m.stats().mean_s, m.stats().std_error_s.unwrap());
        let (rc, ri) = (crit.stats().mean_s / ms - 1.0, indep.stats().mean_s / ms - 1.0);
        println!(
            "chain x8: MC {ms:.4e} ± {se:.1e}, critical path {:.4e} ({rc:+.2e}), independent {:.4e} ({ri:+.2e})",
            crit.stats().mean_s,
            indep.stats().mean_s,
        );
        assert!(crit.stats().mean_s < ms + 4.0 * se);
        assert!(indep.stats().mean_s > ms - 4.0 * se);
        assert!(rc > -0.08, "critical path {rc:e}");
    }

    #[test]
    fn per_call_draws_correlate_ranks() {
        // One slow uplink delays every rank behind it in the same call: with per-call draws the
        // maximum over ranks is smaller (positively associated arrivals) than with
        // independent per-transfer draws.
        let (t, lat) = cluster();
        let plan = Plan::from_tree(0, &trees::flat(32, 0), 1, "flat");
        let a = monte_carlo_plan_time(&t, &plan, 64, &lat, &mc(20_000, 3)).unwrap();
        let b = monte_carlo_plan_time(
            &t,
            &plan,
            64,
            &lat,
            &MonteCarloOptions {
                per_call_link_draws: true,
                ..mc(20_000, 3)
            },
        )
        .unwrap();
        let se = a.stats().std_error_s.unwrap() + b.stats().std_error_s.unwrap();
        assert!(
            b.stats().mean_s + 4.0 * se < a.stats().mean_s,
            "{} vs {}",
            b.stats().mean_s,
            a.stats().mean_s
        );
        // Per-rank means do not depend on the sharing (same marginals).
        for (x, y) in a.stats().rank_mean_s.iter().zip(&b.stats().rank_mean_s) {
            assert!((x - y).abs() < 0.02 * y.max(1e-9));
        }
    }

    #[test]
    fn latencies_from_fits_and_defaults() {
        let mut b = TopologyBuilder::new();
        let sw = b.vertex("sw", VertexKind::Switch);
        let r0 = b.rank(0);
        let r1 = b.rank(1);
        let r2 = b.rank(2);
        b.link(r0, sw, 1e-6, 1e9);
        b.link(r1, sw, 2e-6, 1e9);
        b.link(r2, sw, 0.0, 1e9);
        b.links[0].latency_fit = Some(LatencyFit {
            pareto: Some((1e-6, 0.5)),
            normal: Some((1.5e-6, 0.0)),
            samples: 16,
        });
        let t = b.build().unwrap();
        let d = |l: usize| DirLink { link: l, forward: true };
        let p = LinkLatencies::from_topology(&t, LatencyFamily::Pareto, Some(8.0)).unwrap();
        // Fitted alpha <= 1: clipped at k m^(1/alpha) = 1e-6 * 16^2.
        match p.get(d(0)) {
            Marginal::Pareto(x) => assert!((x.cap.unwrap() - 256e-6).abs() < 1e-15),
            m => panic!("{m:?}"),
        }
        assert_eq!(*p.get(d(1)), Marginal::Pareto(Pareto::new(2e-6, 8.0).unwrap()));
        assert_eq!(*p.get(d(2)), Marginal::Point(0.0));
        let n = LinkLatencies::from_topology(&t, LatencyFamily::Normal, Some(8.0)).unwrap();
        assert_eq!(*n.get(d(0)), Marginal::Point(1.5e-6)); // sigma 0: the delta of [Kaishima2005]
        match n.get(d(1)) {
            Marginal::Normal(x) => {
                assert!((x.mu - 8.0 * 2e-6 / 7.0).abs() < 1e-18);
                assert!((x.sigma - 2e-6 * (8.0f64 / (49.0 * 6.0)).sqrt()).abs() < 1e-18);
            }
            m => panic!("{m:?}"),
        }
        assert!(LinkLatencies::from_topology(&t, LatencyFamily::Pareto, Some(0.5)).is_err());
        let none = LinkLatencies::from_topology(&t, LatencyFamily::Pareto, None).unwrap();
        assert_eq!(*none.get(d(1)), Marginal::Point(2e-6));
    }

    #[test]
    fn prediction_for_the_profiler() {
        let (t, _) = cluster();
        let plan = crate::plan::default_plan(32, 0, 1024);
        let p = predict_plan_time(&t, &plan, 1024, &PredictOptions::default()).unwrap();
        let det = p.deterministic.completion_s;
        assert!(det > 0.0);
        for s in [&p.pareto, &p.normal] {
            assert!(s.mean_s > det && s.p50_s <= s.p99_s && s.p99_s > det, "{s:?}");
            assert_eq!(s.rank_mean_s.len(), 32);
            assert!(s.clipped_mass < 1e-6);
        }
        // With matched mean and variance the Pareto model has the longer tail (Fig. 4 in a tree).
        assert!(p.pareto.p99_s > p.normal.p99_s);
        let mc = predict_plan_time(
            &t,
            &plan,
            1024,
            &PredictOptions {
                method: PredictMethod::MonteCarlo(mc(5_000, 1)),
                ..PredictOptions::default()
            },
        )
        .unwrap();
        assert!((mc.pareto.mean_s / p.pareto.mean_s - 1.0).abs() < 0.05);
        assert!(predict_plan_time(&t, &crate::plan::default_plan(5, 0, 8), 8, &PredictOptions::default()).is_err());
    }
}
