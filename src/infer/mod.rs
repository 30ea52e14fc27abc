//! Inferring the switch tree from RTTs (seed 002), and going past the paper's limits.
//!
//! Entry point: [`infer`] runs probing rounds through any [`Prober`] and returns a host-level
//! [`Topology`] (switches + one `node` leaf per host, named by host) with per-link latency, the
//! bandwidth measured by the staged bandwidth map when asked for, and latency fits on host links.
//!
//! Pipeline (each step in its own module):
//! 1. [`locate`](self) — the paper's `add` with Eq. 1 and interval snapping, as a stateless search
//!    (see `locate.rs`);
//! 2. `driver` — **batch insertion**: every uncommitted host searches at once, requests become
//!    rounds of disjoint pairs (the paper's "future work": parallel insertion);
//! 3. `refine` — verification (hosts whose leaf is long enough to hide a switch are checked
//!    against their siblings; hosts whose measurements disagree with the tree are re-located),
//!    the **adaptive merge** of switches split by jitter (the paper's open problem), and a
//!    least-squares refit of link latencies to every measurement;
//! 4. `bandwidth` — the staged concurrent bandwidth map;
//! 5. `export` — the `Topology`, and expansion to ranks.
//!
//! Accuracy metrics against a known tree live in [`metrics`].

mod bandwidth;
mod driver;
mod export;
mod fit;
mod locate;
pub mod metrics;
mod refine;
mod store;
mod tree;

pub use bandwidth::BandwidthMap;
pub use export::with_ranks;

use crate::probe::{PingSpec, ProbeError, ProbeStats, Prober};
use crate::topology::Topology;
use locate::LocateParams;
use serde::Serialize;
use std::collections::VecDeque;
use std::fmt;

/// How hosts are inserted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Strategy {
    /// Concurrent insertion with adaptive sibling checks, verification and adaptive merge.
    #[default]
    Batch,
    /// Seed 002 as published: one insertion at a time, every branch checked, `find_close_host`
    /// ten hosts ahead, snapping within the measured interval only.
    Paper,
    /// Measure every pair (round-robin rounds), then build the tree from the full matrix.
    AllPairs,
}

/// Options of [`infer`].
#[derive(Clone, Debug)]
pub struct InferOptions {
    pub strategy: Strategy,
    /// Seed of the insertion order and of server choices.
    pub seed: u64,
    /// The ping-pong protocol.
    pub ping: PingSpec,
    /// Build the staged bandwidth map with transfers of this many bytes.
    pub bandwidth_bytes: Option<u64>,
    /// Use host order as a locality hint: insert hosts in an order that spreads over the host
    /// list (bit-reversed positions) and start each host's search at the committed host nearest
    /// to it in host order. MPI jobs list hosts in hostfile / allocation order, which usually
    /// follows racks and switches, so the first measurement is then mostly short. Only speed
    /// depends on it: with an uncorrelated order it is as good as random.
    pub locality_hint: bool,
}

impl Default for InferOptions {
    fn default() -> Self {
        InferOptions {
            strategy: Strategy::Batch,
            seed: 1,
            ping: PingSpec::default(),
            bandwidth_bytes: None,
            locality_hint: true,
        }
    }
}

/// What inference did, besides the tree.
#[derive(Clone, Debug, Default, Serialize)]
pub struct InferStats {
    /// Probing accounting (rounds, pairs, virtual or wall time).
    pub probe: ProbeStats,
    /// Measurements repeated because they disagreed with the tree.
    pub remeasured: u64,
    /// Measurements dropped as outliers.
    pub dropped: u64,
    /// Hosts moved by verification.
    pub relocated: u64,
    /// Switches removed by the adaptive merge.
    pub merged: u64,
    /// Estimated noise of one-way distance estimates, seconds.
    pub noise_s: f64,
    /// Links between switches shorter than this were merged, seconds.
    pub merge_threshold_s: f64,
}

/// The inferred tree.
#[derive(Clone, Debug)]
pub struct Inferred {
    /// Host-level tree: `switch` vertices and one `node` leaf per host (named by host).
    pub topology: Topology,
    pub stats: InferStats,
    /// The bandwidth map, when one was built.
    pub bandwidth: Option<BandwidthMap>,
}

/// Why inference failed.
#[derive(Clone, Debug, PartialEq)]
pub enum InferError {
    Probe(ProbeError),
    /// A bug or an impossible state (reported rather than panicking).
    Internal(String),
}

impl From<ProbeError> for InferError {
    fn from(e: ProbeError) -> Self {
        InferError::Probe(e)
    }
}

impl fmt::Display for InferError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InferError::Probe(e) => write!(f, "{e}"),
            InferError::Internal(m) => write!(f, "inference failed: {m}"),
        }
    }
}

impl std::error::Error for InferError {}

/// Probe through `prober` and infer the host-level tree.
pub fn infer(prober: &mut dyn Prober, opts: &InferOptions) -> Result<Inferred, InferError> {
    let n = prober.num_hosts();
    if n == 0 {
        return Err(InferError::Probe(ProbeError::BadRequest("no hosts to infer a tree over".into())));
    }
    let names: Vec<String> = (0..n).map(|h| prober.host_name(h).to_string()).collect();
    let mut run = driver::Run::new(prober, opts.ping, opts.seed);
    run.hint = opts.locality_hint && opts.strategy != Strategy::Paper;
    let mut order: VecDeque<usize> = if run.hint {
        spread_order(n, run.rng.below(n as u64) as usize).into()
    } else {
        let mut o: Vec<usize> = (0..n).collect();
        run.rng.shuffle(&mut o);
        o.into()
    };

    if opts.strategy == Strategy::AllPairs {
        for round in crate::probe::round_robin_rounds(n) {
            run.measure(&round)?;
        }
    }
    run.seed_tree(&mut order)?;
    let mut stats = InferStats::default();
    match opts.strategy {
        Strategy::Batch | Strategy::AllPairs => {
            run.insert_batch(order, &batch_params)?;
            let r = refine::refine(&mut run, &batch_params)?;
            stats.relocated = r.relocated + run.counters.relocated;
            stats.merged = r.merged;
            stats.noise_s = r.noise_s;
            stats.merge_threshold_s = r.threshold_s;
        }
        Strategy::Paper => {
            run.insert_paper(order, &paper_params(&run.store))?;
        }
    }
    let bandwidth = match opts.bandwidth_bytes {
        Some(bytes) if n >= 2 => Some(bandwidth::measure(&mut run, bytes)?),
        _ => None,
    };
    stats.remeasured = run.counters.remeasured;
    stats.dropped = run.counters.dropped;
    let topology = export::to_topology(&run.tree, &names, &run.store, bandwidth.as_ref().map(|m| &m.per_link))
        .map_err(|e| InferError::Internal(e.to_string()))?;
    stats.probe = run.prober.stats().clone();
    Ok(Inferred {
        topology,
        stats,
        bandwidth,
    })
}

/// `0..n` in bit-reversed order of positions, rotated by `offset`: every prefix is spread evenly
/// over the host list, so each newly inserted host has an already inserted neighbour in host
/// order about `n / inserted` positions away.
fn spread_order(n: usize, offset: usize) -> Vec<usize> {
    let bits = n.next_power_of_two().trailing_zeros();
    (0..n.next_power_of_two())
        .map(|i| if bits == 0 { 0 } else { i.reverse_bits() >> (usize::BITS - bits) })
        .filter(|&p| p < n)
        .map(|p| (p + offset) % n)
        .collect()
}

/// Noise scale of one-way distances seen so far: the median half-interval, i.e. how much the
/// minimum of one set typically differs from another's.
fn noise_scale(store: &store::Store) -> f64 {
    store.u_quantile(0.5)
}

/// Batch-mode tolerances, re-derived from the measurements each round.
///
/// The snapping tolerance is the paper's interval rule (`kappa` times the two intervals) with a
/// floor at a few typical intervals: three sets sometimes agree by chance, and the paper's first
/// error kind (one switch split in several) is exactly an interval that came out too small.
fn batch_params(store: &store::Store) -> LocateParams {
    let sigma = noise_scale(store);
    LocateParams {
        exhaustive: false,
        kappa: 2.0,
        tol_floor: (8.0 * sigma).max(1e-9),
        flag_delta: (8.0 * sigma).max(1e-9),
        robust: true,
        max_times: 2,
    }
}

/// Seed 002's rule: the branching point snaps to an existing switch within the interval.
fn paper_params(_store: &store::Store) -> LocateParams {
    LocateParams {
        exhaustive: true,
        kappa: 0.5,
        tol_floor: 1e-12,
        flag_delta: 0.0,
        robust: false,
        max_times: 1,
    }
}
