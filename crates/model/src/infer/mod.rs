//! Inferring the switch tree from RTTs ([Shirai2007]), and going past its limits.
//!
//! Entry point: [`infer`] runs probing rounds through any [`Prober`] and returns a host-level
//! [`Topology`] (switches + one `node` leaf per host, named by host) with per-link latency, the
//! bandwidth measured by the staged bandwidth map when asked for, and latency fits on host links.
//! [`with_ranks`] hangs a job's ranks below their hosts again.
//!
//! How (each step in its own module):
//! 1. `locate` — the `add` of [Shirai2007] (Eq. 1, interval snapping, exclusion of the subtrees holding a
//!    measured host) as a stateless search over everything measured from a host, plus
//!    consistency checks with re-measurement (outliers), *access-length pruning* (a host whose
//!    leaf is a plain access link cannot hide below any branch: where access links are alike, one
//!    or two measurements place a host instead of the O(ports) of [Shirai2007]), and least-squares
//!    placement of hosts whose own measurements are much noisier (a loaded host).
//! 2. `driver` — **parallel insertion** (future work in [Shirai2007]). A warm-up round measures
//!    neighbours in host order; contiguous blocks of hosts (a locality hint: hostfile order) grow
//!    their own trees concurrently, requests of all searching hosts packed into rounds of disjoint
//!    pairs; a skeleton tree of two hosts per block grows in the same rounds, and the blocks' hosts
//!    are merged into it as they are committed, reusing what the blocks measured. Without the hint,
//!    one tree grows from a random order (doubling its hosts every few rounds).
//!    **Far-apart parts** (`parts`, `graft`): where blocks are joined only by routed or
//!    wide-area paths (round trips of `far_rtt_s` and more), each part grows its own tree in the
//!    shared rounds and far pairs are measured with one round trip only, kept out of every
//!    search; the parts are grafted at the end from those one-sample measurements (exit point
//!    per part, a small tree between the exits). A graft that does not fit falls back to one
//!    tree.
//! 3. `refine` — verification (hosts whose leaf is not a plain access link, or whose measurements
//!    disagree with the tree, are located again; switches discovered twice are merged), a
//!    least-squares refit of link latencies to every measurement, and the **adaptive merge** of
//!    switches split by jitter (an open problem in [Shirai2007]: the threshold comes from the noise scale
//!    and the largest gap among switch-to-switch link lengths).
//! 4. `bandwidth` — the staged concurrent bandwidth map of [Shirai2007] §6.1.
//! 5. `export` — the `Topology`, latency fits, and expansion to ranks.
//!
//! Accuracy metrics against a known tree live in [`metrics`].
//!
//! Everything here is pure: measurements come through the [`Prober`] trait only, so the same
//! code runs over MPI, an RTT matrix, or a simulated tree of any size.

mod bandwidth;
mod budget;
mod center;
mod driver;
mod export;
mod fit;
mod graft;
mod joining;
mod lengths;
mod locate;
pub mod metrics;
mod part_run;
mod parts;
mod recheck;
mod refine;
mod store;
mod tree;

pub use bandwidth::BandwidthMap;
pub use export::with_ranks;
pub use part_run::{work as part_work, LED_PART_MIN_HOSTS};
pub use parts::{far_threshold, GAP_OUTLIERS, MIN_FAR_GAP, MIN_FAR_RTT_S};

use crate::probe::{PingSpec, ProbeError, ProbeStats, Prober};
use crate::topology::Topology;
use driver::Builder;
use locate::LocateParams;
use serde::Serialize;
use std::collections::VecDeque;
use std::fmt;

/// Jobs with at most this many hosts measure every pair ([`Strategy::Auto`]): `n - 1` rounds of
/// disjoint pairs cost little at this size (31 rounds of ~30 round trips), and weighing every
/// pair at once is what copes with noise close to the shortest link (emulated hosts).
pub const ALL_PAIRS_MAX_HOSTS: usize = 32;

/// How hosts are inserted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Strategy {
    /// [`AllPairs`](Self::AllPairs) up to [`ALL_PAIRS_MAX_HOSTS`] hosts, else
    /// [`Batch`](Self::Batch).
    #[default]
    Auto,
    /// Concurrent insertion with adaptive sibling checks, verification and adaptive merge.
    Batch,
    /// [Shirai2007] as published: one insertion at a time, every branch checked, `find_close_host`
    /// ten hosts ahead, snapping within the measured interval only.
    Paper,
    /// Measure every pair (round-robin rounds, the sets of all pairs interleaved in time), then
    /// build the tree from the full matrix by rooted neighbour joining ([`joining`]).
    AllPairs,
}

impl Strategy {
    /// The strategy actually used for `n` hosts.
    pub fn resolve(self, n: usize) -> Strategy {
        match self {
            Strategy::Auto if n <= ALL_PAIRS_MAX_HOSTS => Strategy::AllPairs,
            Strategy::Auto => Strategy::Batch,
            s => s,
        }
    }
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
    /// Round trips at least this long (seconds) cross routers or wide-area links: hosts are
    /// grouped into parts joined only by such paths, each part inferred on its own and the parts
    /// joined from one-sample measurements (see `parts`). `None` (the default): the threshold
    /// comes from the data, a gap in the round trips of the first two rounds
    /// ([`far_threshold`]). Infinite: one tree, every pair measured with the full protocol.
    pub far_rtt_s: Option<f64>,
    /// Far-apart parts of at least this many hosts (other than host 0's) are inferred under
    /// their own leader, the others together under host 0 (see `part_run`); default
    /// [`LED_PART_MIN_HOSTS`].
    pub led_part_min_hosts: usize,
    /// Switch-to-switch links shorter than this (seconds) are beyond what the measuring machine
    /// can resolve, whatever the evidence: contracted and reported as uncertain. 0 (the
    /// default): no absolute floor. Live jobs set [`InferOptions::resolution_of_host_link`]
    /// instead; this one is for replays of dumps that recorded an absolute floor, and for
    /// `treecast infer --resolution-us`.
    pub resolution_s: f64,
    /// The same floor as a fraction of the median host link (the one-way cost of a message at
    /// its two ends): links shorter than that fraction of it are contracted and reported as
    /// uncertain. 0 (the default) on distinct machines; [`SHARED_CPU_RESOLUTION`] where hosts
    /// share CPUs. Where both are set, the larger floor applies.
    pub resolution_of_host_link: f64,
}

/// Shortest switch-to-switch link hosts sharing CPUs can resolve (emulated clusters), as a
/// fraction of the median host link.
///
/// Why a floor: where the hosts are namespaces on one 2-core machine, a pair's reading depends
/// on the CPUs its ranks and their neighbours' ranks run on, and that bias repeats set after
/// set, so it is no noise the sets average out. On a fresh machine the uneven emulated shape
/// read h003 - h005 and h004 - h006 0.5-0.7 us short in about half the runs of
/// `uneven_leaf_switches`: two hidden switches 0.24-0.46 us below the real one (0.07-0.14 of
/// host links of about 3.3 us, what machines of that kind read), kept with confidence 0.98-1.00.
///
/// Why relative: the bias, the host links and the emulated switch hops (bridges) are all work
/// of the same kernel and scale with the machine's speed. A floor of 1 us held where host
/// links read 3.3-3.5 us and the 2-bridge hops 1.2-2.4 us (0.36-0.66 of them, 36 start-up
/// probes of five shapes on 2026-12-02), and failed on a CI machine about 25% faster, where
/// `pingpong` read 8.2 us within a switch and 12.2 across (10.8 and 16.4 on the first): the
/// hops came near 1 us, and the 3x3 found its tree in 1 probe of 10, the three-level tree in 0
/// of 6, each wrong one short of one or more uplinks. Replaying the first machine's probes with
/// the floor raised to 1.5 us gave the same pattern. 0.2 lies between the artefacts (at most
/// 0.14) and the shortest real hop seen (0.36). Real clusters (distinct kernels) keep no
/// floor.
pub const SHARED_CPU_RESOLUTION: f64 = 0.2;

impl InferOptions {
    /// What a probe dump records of these options: the settings a replay needs to infer as the
    /// live job did.
    pub fn recorded(&self) -> crate::probe::RecordedSettings {
        let finite = |x: f64| x.is_finite().then_some(x);
        crate::probe::RecordedSettings {
            resolution_s: self.resolution_s,
            resolution_of_host_link: self.resolution_of_host_link,
            far_rtt_s: self.far_rtt_s.and_then(finite),
            one_tree: self.far_rtt_s.is_some_and(f64::is_infinite),
            led_part_min_hosts: self.led_part_min_hosts,
            give_up_s: finite(self.ping.give_up_s),
            give_up_ratio: self.ping.give_up_ratio,
        }
    }

    /// Whether these options say the hosts share CPUs (a resolution floor of either kind):
    /// then a set's reading is divided by the machine's speed while it ran (`store`).
    pub fn hosts_share_cpus(&self) -> bool {
        self.resolution_s > 0.0 || self.resolution_of_host_link > 0.0
    }

    /// These options with a dump's recorded settings in place of their own.
    pub fn with_recorded(mut self, r: &crate::probe::RecordedSettings) -> InferOptions {
        self.resolution_s = r.resolution_s;
        self.resolution_of_host_link = r.resolution_of_host_link;
        self.far_rtt_s = if r.one_tree { Some(f64::INFINITY) } else { r.far_rtt_s };
        self.led_part_min_hosts = r.led_part_min_hosts;
        self.ping.give_up_s = r.give_up_s.unwrap_or(f64::INFINITY);
        self.ping.give_up_ratio = r.give_up_ratio;
        self
    }
}

impl Default for InferOptions {
    fn default() -> Self {
        InferOptions {
            strategy: Strategy::Auto,
            seed: 1,
            ping: PingSpec::default(),
            bandwidth_bytes: None,
            locality_hint: true,
            far_rtt_s: None,
            led_part_min_hosts: LED_PART_MIN_HOSTS,
            resolution_s: 0.0,
            resolution_of_host_link: 0.0,
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
    /// Pair measurements ended early by a stalled round trip (`PingSpec::give_up_s`).
    pub given_up: u64,
    /// Hosts moved by verification.
    pub relocated: u64,
    /// Switches removed by the adaptive merge.
    pub merged: u64,
    /// Estimated noise of one-way distance estimates, seconds.
    pub noise_s: f64,
    /// Links between switches shorter than this were merged, seconds.
    pub merge_threshold_s: f64,
    /// Every link decision weighed by evidence: each switch-to-switch link kept, each
    /// contracted for lack of evidence (all-pairs inference), and each contracted because
    /// pairs measured again fit better without it (`recheck`, at any number of hosts), least
    /// confident first.
    pub decisions: Vec<LinkDecision>,
    /// The tree's confidence: that of its least certain decision (`None` when no decision was
    /// weighed: one or two hosts, more than [`EVIDENCE_MAX_HOSTS`], or no switch-to-switch
    /// link that a measured pair crosses, as between far-apart parts joined by the graft).
    pub confidence: Option<f64>,
    /// The far threshold used (round trip, seconds): given, or found in the data; `None` when
    /// no far-apart parts were looked for or the data showed no gap.
    pub far_rtt_s: Option<f64>,
    /// Links the recheck on fresh readings contracted (become `decisions`).
    #[serde(skip)]
    pub(crate) rechecked: Vec<recheck::Contracted>,
}

/// Most hosts for which the evidence of every link is computed (one least-squares refit per
/// switch-to-switch link over every measured pair).
pub const EVIDENCE_MAX_HOSTS: usize = 64;

/// One decision about a switch-to-switch link and how sure it is.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LinkDecision {
    /// Hosts below the link (the side away from the top of the tree).
    pub hosts_below: Vec<String>,
    /// One-way latency of the link, microseconds.
    pub latency_us: f64,
    /// How much worse the measurements fit without the link, in noise units (chi-square-like).
    pub evidence: f64,
    /// A kept link's evidence in each half of the sets (even- and odd-numbered), on the same
    /// tree: its confidence is judged on [`replicated`] evidence.
    pub halves: Option<[f64; 2]>,
    /// Kept in the tree (else contracted for lack of evidence).
    pub kept: bool,
    /// Confidence (0..1) that the decision is right.
    pub confidence: f64,
    /// What judged it: `evidence` (every measurement, weighed against a keep threshold) or
    /// `fresh readings` (pairs measured again, the tree with the link against the tree
    /// without; its evidence is in squared noise units and the threshold is 0).
    pub judged_by: &'static str,
}

impl LinkDecision {
    /// One line for logs: what was decided, on what evidence, how sure.
    pub fn describe(&self) -> String {
        format!(
            "{} the {:.2} us link above {{{}}}: evidence {:.1}{} ({}), confidence {:.3}",
            if self.kept { "kept" } else { "contracted" },
            self.latency_us,
            self.hosts_below.join(" "),
            self.evidence,
            self.halves
                .map_or(String::new(), |[a, b]| format!(", halves {a:.1} / {b:.1}")),
            self.judged_by,
            self.confidence
        )
    }
}

/// The inferred tree.
#[derive(Clone, Debug)]
pub struct Inferred {
    /// Host-level tree: `switch` vertices and one `node` leaf per host (named by host).
    pub topology: Topology,
    pub stats: InferStats,
    /// The bandwidth map, when one was built.
    pub bandwidth: Option<BandwidthMap>,
    /// Every ping measurement, in the order taken (for latency fits, dumps and replays).
    pub measurements: Vec<crate::probe::PairMeasurement>,
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
        return Err(InferError::Probe(ProbeError::BadRequest(
            "no hosts to infer a tree over".into(),
        )));
    }
    let names: Vec<String> = (0..n).map(|h| prober.host_name(h).to_string()).collect();
    let strategy = opts.strategy.resolve(n);
    let mut run = driver::Run::new(prober, opts.ping, opts.seed);
    run.hint = opts.locality_hint && strategy != Strategy::Paper;
    // Hosts sharing CPUs share a kernel whose speed moves in windows (`store`).
    run.store.use_median_of_windows(opts.hosts_share_cpus());
    let mut stats = InferStats::default();
    let mut contracted: Vec<joining::Merged> = Vec::new();
    let mut main = match strategy {
        Strategy::Paper => {
            let mut order: Vec<usize> = (0..n).collect();
            run.rng.shuffle(&mut order);
            let mut b = Builder::new(n, order.into());
            run.seed_paper(&mut b)?;
            run.insert_paper(&mut b, &paper_params(&run.store))?;
            b
        }
        Strategy::AllPairs => {
            // Far-apart parts first (one-sample readings, nothing stored): all-pairs would
            // measure every far pair in full, seconds on a wide-area link.
            let detected = if run.hint && opts.far_rtt_s.is_none_or(f64::is_finite) {
                Some(parts::detect(&mut run, n, opts.far_rtt_s, false)?)
            } else {
                None
            };
            match detected {
                Some(d) if d.parts.len() > 1 => batch(&mut run, n, &mut stats, Some(d), opts.led_part_min_hosts)?,
                _ => {
                    let j = all_pairs(&mut run, n)?;
                    stats.noise_s = j.noise_s;
                    stats.merge_threshold_s = j.threshold_s;
                    contracted = j.merged.clone();
                    let mut b = Builder::new(n, VecDeque::new());
                    b.tree = j.tree;
                    b
                }
            }
        }
        Strategy::Batch | Strategy::Auto => {
            // With the locality hint, far-apart parts are looked for first (see `parts`), and
            // the blocks of insertion are cut within each part; far readings are kept for
            // the graft only.
            let detected = if run.hint && opts.far_rtt_s.is_none_or(f64::is_finite) {
                Some(parts::detect(&mut run, n, opts.far_rtt_s, true)?)
            } else {
                None
            };
            batch(&mut run, n, &mut stats, detected, opts.led_part_min_hosts)?
        }
    };
    let floor = opts
        .resolution_s
        .max(opts.resolution_of_host_link * median_host_link(&main.tree));
    let unresolvable = contract_unresolvable(&mut main.tree, floor);
    if !unresolvable.is_empty() {
        lengths::refit(&mut main.tree, &run.store, stats.noise_s, 20);
        contracted.extend(unresolvable);
    }
    // Root where the physical hierarchy has its top (see `center`), within the noise of one
    // distance: the fitted link lengths the center is computed from are at least that good.
    center::root_at_center(&mut main.tree, stats.noise_s);
    let link_confidence = weigh_decisions(&main.tree, &run.store, &names, &contracted, &mut stats);
    let bandwidth = match opts.bandwidth_bytes {
        Some(bytes) if n >= 2 => Some(bandwidth::measure(&mut run, &main.tree, bytes)?),
        _ => None,
    };
    stats.remeasured = run.counters.remeasured;
    stats.dropped = run.counters.dropped;
    stats.given_up = run.counters.given_up;
    let topology = export::to_topology(
        &main.tree,
        &names,
        &run.store,
        bandwidth.as_ref().map(|m| &m.per_link),
        &link_confidence,
        stats.confidence,
    )
    .map_err(|e| InferError::Internal(e.to_string()))?;
    main.tree = tree::WorkTree::default();
    stats.probe = run.prober.stats().clone();
    let measurements = std::mem::take(&mut run.store.raw);
    log::debug!(
        "probing: {} rounds, {:.4} s measuring + {:.4} s coordinating",
        stats.probe.ping_rounds,
        stats.probe.measure_time_s,
        stats.probe.coordination_time_s
    );
    Ok(Inferred {
        topology,
        stats,
        bandwidth,
        measurements,
    })
}

/// Batch inference: parts (when `detected`; else blocks of the host list), insertion of many
/// hosts per round, refinement, and the graft of the parts' trees.
fn batch(
    run: &mut driver::Run,
    n: usize,
    stats: &mut InferStats,
    detected: Option<parts::Detected>,
    led_min: usize,
) -> Result<Builder, InferError> {
    let (blocks, split, far, part_hosts) = match detected {
        Some(d) => {
            stats.far_rtt_s = d.far_rtt_s.is_finite().then_some(d.far_rtt_s);
            let rng = &mut run.rng;
            let (blocks, split) = parts::blocks_of(
                &d.parts,
                GROUP,
                |len| rng.below(len as u64 / 2 + 1) as usize,
                spread_pairs,
            );
            (blocks, split, d.far, d.parts)
        }
        None => {
            let blocks = insertion_groups(n, run.hint, &mut run.rng);
            let all = vec![(0..blocks.len()).collect::<Vec<usize>>()];
            (blocks, all, Vec::new(), vec![(0..n).collect()])
        }
    };
    // Cut short at the far threshold: within a part, only a spike reads that long.
    let cut = stats.far_rtt_s.unwrap_or(f64::INFINITY);
    log::debug!(
        "{} far-apart part(s) of {:?} block(s)",
        split.len(),
        split.iter().map(Vec::len).collect::<Vec<_>>()
    );
    let (mut mains, mut r) = if split.len() > 1 {
        infer_parts_apart(run, &blocks, &split, &part_hosts, cut, led_min)?
    } else {
        grow_and_refine(run, &blocks, &split, cut)?
    };
    let main = if mains.len() == 1 {
        mains.pop().expect("one part")
    } else {
        let trees: Vec<tree::WorkTree> = mains.into_iter().map(|b| b.tree).collect();
        let tol = {
            let refs: Vec<&tree::WorkTree> = trees.iter().collect();
            batch_params(&run.store, &refs).tol_floor
        };
        // A graft that does not fit gets more readings between the parts, up to
        // GRAFT_RETRIES rounds, before one tree is inferred over all hosts: one-sample
        // readings are rough, and one more round costs one far round trip.
        // The last try allows the exits to lie further apart (`graft::LAST_TRY_ALLOWANCE`).
        let mut far = far;
        let mut grafted = graft::join(n, &trees, &far, tol, 1.0);
        for k in 0..GRAFT_RETRIES {
            let Err(why) = &grafted else { break };
            log::debug!("far-apart parts do not graft ({why}); measuring more pairs between them");
            let hosts: Vec<Vec<usize>> = trees.iter().map(|t| t.hosts().collect()).collect();
            far.extend(parts::more_far(run, &hosts)?);
            grafted = graft::join(n, &trees, &far, tol, 1.0);
            if let (true, Err(strict)) = (k + 1 == GRAFT_RETRIES, &grafted) {
                let lenient = graft::join(n, &trees, &far, tol, graft::LAST_TRY_ALLOWANCE);
                if lenient.is_ok() {
                    log::info!(
                        "far-apart parts grafted on the last try, although {strict}: within {}x that, \
                         the parts' exits may be off by that much",
                        graft::LAST_TRY_ALLOWANCE
                    );
                }
                grafted = lenient;
            }
        }
        match grafted {
            Ok(mut t) => {
                // Weigh the short links once more in the joined tree: a link that split a leaf
                // switch of a part (8 hosts: 6 + 2) kept evidence 28 in the part's own tree and
                // had 5.6 in the joined one, where the part's exit hangs from it; the final
                // report weighs links there, so they are contracted by the same measure.
                let merged = refine::contract_weighed(&mut t, &run.store, r.noise_s, refine::WEIGH_UPTO * r.noise_s);
                if merged > 0 {
                    log::debug!("graft: {merged} short link(s) the joined tree does not support contracted");
                    lengths::refit(&mut t, &run.store, r.noise_s, 300);
                }
                r.merged += merged;
                let mut b = Builder::new(n, VecDeque::new());
                b.tree = t;
                b
            }
            Err(why) => {
                // Correctness first: one tree over all hosts, measuring far pairs in
                // full where it needs them (what was measured finely is reused).
                log::info!("far-apart parts do not graft ({why}); inferring one tree");
                let all = vec![(0..blocks.len()).collect::<Vec<usize>>()];
                let mut one = parts::grow(run, n, &blocks, &all, &batch_params)?;
                r = refine::refine(run, &mut one, &batch_params)?;
                one.pop().expect("one part")
            }
        }
    };
    stats.relocated = r.relocated + run.counters.relocated;
    stats.merged = r.merged;
    stats.rechecked = r.rechecked;
    stats.noise_s = r.noise_s;
    stats.merge_threshold_s = r.threshold_s;
    Ok(main)
}

/// Warm-up: consecutive hosts of each insertion order in one round of disjoint pairs
/// (neighbours in host order with the hint), those not measured already, cut short at `cut`
/// (round trip, seconds); then the statistic. It yields the access length from the start (two
/// hosts on one switch are two access links apart) and gives every host a first measurement
/// for when its partner is inserted.
pub(crate) fn warm_up(run: &mut driver::Run, blocks: &[Vec<usize>], cut: f64) -> Result<(), InferError> {
    let warm: Vec<(usize, usize)> = blocks
        .iter()
        .flat_map(|g| g.chunks_exact(2).map(|c| (c[1], c[0])).collect::<Vec<_>>())
        .filter(|&(a, b)| run.store.get(a, b).is_none())
        .collect();
    if !warm.is_empty() {
        run.measure_far(&warm, cut)?;
    }
    choose_statistic(&mut run.store);
    let (spec, why) = budget::adapt(&run.protocol, &run.store);
    log::debug!("round trips per set: {why}");
    run.spec = spec;
    Ok(())
}

/// Warm-up, insertion and refinement of `parts` (each a list of indices into `blocks`) side by
/// side in `run`'s rounds: one tree per part, in order, and one refinement report.
pub(crate) fn grow_and_refine(
    run: &mut driver::Run,
    blocks: &[Vec<usize>],
    parts: &[Vec<usize>],
    cut: f64,
) -> Result<(Vec<Builder>, refine::RefineReport), InferError> {
    warm_up(run, blocks, cut)?;
    let n = run.prober.num_hosts();
    let mut mains = parts::grow(run, n, blocks, parts, &batch_params)?;
    log::trace!("insertion done; refining");
    let r = refine::refine(run, &mut mains, &batch_params)?;
    Ok((mains, r))
}

/// Far-apart parts inferred under their own leaders (`part_run`): every part of at least
/// `led_min` hosts but host 0's is a job of its own, led by its least
/// host; host 0's part and all small parts are one job, led by host 0. The parts' trees come
/// back in the order of `split`, their measurements taken into this run's store, with one
/// refinement report over all of them (noise and threshold the largest, counts added up).
fn infer_parts_apart(
    run: &mut driver::Run,
    blocks: &[Vec<usize>],
    split: &[Vec<usize>],
    part_hosts: &[Vec<usize>],
    cut: f64,
    led_min: usize,
) -> Result<(Vec<Builder>, refine::RefineReport), InferError> {
    let n = run.prober.num_hosts();
    let led = |p: usize| p > 0 && part_hosts[p].len() >= led_min.max(1);
    // Jobs as lists of part indices; the first is host 0's.
    let mut groups: Vec<Vec<usize>> = vec![(0..split.len()).filter(|&p| !led(p)).collect()];
    groups.extend((0..split.len()).filter(|&p| led(p)).map(|p| vec![p]));
    if groups.len() == 1 {
        // No part is led elsewhere: all grow here, side by side.
        return grow_and_refine(run, blocks, split, cut);
    }
    let mut part_of = vec![usize::MAX; n];
    for (p, hosts) in part_hosts.iter().enumerate() {
        for &h in hosts {
            part_of[h] = p;
        }
    }
    let mut jobs = Vec::with_capacity(groups.len());
    for group in &groups {
        let mut job_blocks: Vec<Vec<usize>> = Vec::new();
        let mut job_parts: Vec<Vec<usize>> = Vec::new();
        for &p in group {
            job_parts.push(
                split[p]
                    .iter()
                    .map(|&b| {
                        job_blocks.push(blocks[b].clone());
                        job_blocks.len() - 1
                    })
                    .collect(),
            );
        }
        let measured = run
            .store
            .raw
            .iter()
            .filter(|m| group.contains(&part_of[m.a]) && part_of[m.a] == part_of[m.b])
            .cloned()
            .collect();
        jobs.push(part_run::PartJob {
            blocks: job_blocks,
            parts: job_parts,
            measured,
            spec: run.protocol,
            far_cut_s: cut,
            seed: run.rng.next_u64(),
            hint: run.hint,
        });
    }
    let leaders: Vec<usize> = groups.iter().map(|g| part_hosts[g[0]][0]).collect();
    let before = run.prober.stats().time_s();
    let outcomes = part_run::run_all(run.prober, &leaders, &jobs)?;
    log::info!(
        "treecast: {} far-apart parts of {:?} hosts inferred under {} leaders (hosts {:?}) in {:.4} s",
        part_hosts.len(),
        part_hosts.iter().map(Vec::len).collect::<Vec<_>>(),
        leaders.len(),
        leaders,
        run.prober.stats().time_s() - before
    );
    let mut trees: Vec<Option<tree::WorkTree>> = vec![None; split.len()];
    let mut report = refine::RefineReport::default();
    for (o, group) in outcomes.into_iter().zip(&groups) {
        if o.trees.len() != group.len() {
            return Err(InferError::Internal(format!(
                "a far-apart part's leader sent {} trees for {} parts",
                o.trees.len(),
                group.len()
            )));
        }
        for m in o.measured {
            run.store.add(m);
        }
        for (a, b) in o.bad {
            run.store.mark_bad(a, b);
        }
        run.counters.absorb(&o.counters);
        report.absorb(o.report);
        for (t, &p) in o.trees.into_iter().zip(group) {
            if !t.holds_exactly(n, &part_hosts[p]) {
                return Err(InferError::Internal(format!(
                    "the leader of far-apart part {p} (host {}) sent a tree that is not one over its {} hosts",
                    part_hosts[p][0],
                    part_hosts[p].len()
                )));
            }
            trees[p] = Some(t);
        }
    }
    choose_statistic(&mut run.store);
    let mains = trees
        .into_iter()
        .map(|t| {
            let mut b = Builder::new(n, VecDeque::new());
            b.tree = t.expect("every part in one job");
            b
        })
        .collect();
    Ok((mains, report))
}

/// The evidence and confidence of every switch-to-switch link of the final tree, and of the
/// links contracted on the way (`contracted`): recorded in `stats` (least confident first,
/// with the tree's confidence) and logged; returns each kept link's confidence by its lower
/// vertex. Skipped beyond [`EVIDENCE_MAX_HOSTS`] hosts.
fn weigh_decisions(
    tree: &tree::WorkTree,
    store: &store::Store,
    names: &[String],
    contracted: &[joining::Merged],
    stats: &mut InferStats,
) -> std::collections::HashMap<usize, f64> {
    let n = tree.num_hosts_in();
    let mut by_vertex = std::collections::HashMap::new();
    let hosts = |ids: &[usize]| ids.iter().map(|&h| names[h].clone()).collect::<Vec<String>>();
    let rechecked: Vec<LinkDecision> = stats
        .rechecked
        .iter()
        .map(|c| LinkDecision {
            hosts_below: hosts(&c.hosts_below),
            latency_us: c.len_s * 1e6,
            evidence: c.evidence,
            halves: None,
            kept: false,
            confidence: joining::confidence(c.evidence, 0.0, false),
            judged_by: "fresh readings",
        })
        .collect();
    if !(3..=EVIDENCE_MAX_HOSTS).contains(&n) {
        // Too many hosts to weigh every link; the recheck's contractions are still reported.
        stats.decisions = rechecked;
        stats.decisions.sort_by(|a, b| a.confidence.total_cmp(&b.confidence));
        return by_vertex;
    }
    let obs: Vec<(usize, usize, f64)> = store
        .pairs()
        .filter(|&(a, b, _)| !store.is_bad(a, b))
        .map(|(a, b, o)| (a, b, o.d))
        .collect();
    let mut fitted = tree.clone();
    let evidence = joining::weighted_evidence(&mut fitted, &obs, stats.noise_s);
    let halves = half_evidence(tree, store, stats.noise_s);
    let median = joining::median_distance(obs.iter().map(|o| o.2));
    // A link no measured pair crosses has no evidence either way: between far-apart parts the
    // graft placed it from one-sample readings (and checked that they agree), so it is not a
    // decision of this weighing; scored, it read "uncertain, evidence 0" on every grafted tree.
    let crossed = |v: usize| {
        let below: std::collections::HashSet<usize> = joining::hosts_below(tree, v).into_iter().collect();
        obs.iter().any(|o| below.contains(&o.0) != below.contains(&o.1))
    };
    let mut decisions: Vec<LinkDecision> = evidence
        .iter()
        .filter(|&&(v, _)| {
            let weighed = crossed(v);
            if !weighed {
                log::debug!(
                    "treecast: the {:.2} us link above {} hosts joins far-apart parts (grafted, not weighed)",
                    tree.len(v) * 1e6,
                    joining::hosts_below(tree, v).len()
                );
            }
            weighed
        })
        .map(|&(v, e)| {
            let halves = halves.get(&v).copied().unwrap_or([e; 2]);
            let c = joining::confidence(
                replicated(e, halves),
                joining::keep_threshold(tree.len(v), median),
                true,
            );
            by_vertex.insert(v, (c * 1e4).round() / 1e4);
            LinkDecision {
                hosts_below: hosts(&joining::hosts_below(tree, v)),
                latency_us: tree.len(v) * 1e6,
                evidence: e,
                halves: Some(halves),
                kept: true,
                confidence: c,
                judged_by: "evidence",
            }
        })
        .collect();
    let shortest_kept = decisions
        .iter()
        .filter(|d| d.kept)
        .map(|d| d.latency_us * 1e-6)
        .filter(|l| *l > 0.0)
        .min_by(f64::total_cmp);
    decisions.extend(contracted.iter().map(|m| LinkDecision {
        hosts_below: hosts(&m.hosts_below),
        latency_us: m.len_s * 1e6,
        evidence: m.evidence,
        halves: None,
        kept: false,
        confidence: joining::contracted_confidence(m, shortest_kept),
        judged_by: "evidence",
    }));
    decisions.extend(rechecked);
    decisions.sort_by(|a, b| a.confidence.total_cmp(&b.confidence));
    stats.confidence = decisions.first().map(|d| (d.confidence * 1e4).round() / 1e4);
    for d in decisions.iter().filter(|d| d.confidence < UNCERTAIN) {
        log::info!("treecast: uncertain: {}", d.describe());
    }
    for d in decisions.iter().filter(|d| d.confidence >= UNCERTAIN) {
        log::debug!("treecast: {}", d.describe());
    }
    let switches = tree.switches().count();
    if switches == 1 {
        let strongest = decisions
            .iter()
            .filter(|d| !d.kept)
            .max_by(|a, b| a.evidence.total_cmp(&b.evidence));
        log::info!(
            "treecast: the measurements support no structure above the hosts: all {n} hosts below one switch{}",
            strongest.map_or(String::new(), |d| format!(" (strongest candidate: {})", d.describe()))
        );
    }
    log::info!(
        "treecast: inferred {switches} switch(es) over {n} hosts, confidence {}",
        stats.confidence.map_or("n/a".into(), |c| format!("{c:.3}"))
    );
    stats.decisions = decisions;
    by_vertex
}

/// Each switch-to-switch link of `tree` (by its lower vertex) with its evidence in the
/// even-numbered and in the odd-numbered sets of the pairs ([`store::Store::half_distances`]).
fn half_evidence(
    tree: &tree::WorkTree,
    store: &store::Store,
    noise_s: f64,
) -> std::collections::HashMap<usize, [f64; 2]> {
    let mut out: std::collections::HashMap<usize, [f64; 2]> = std::collections::HashMap::new();
    for h in 0..2 {
        let mut t = tree.clone();
        for (v, e) in joining::weighted_evidence(&mut t, &store.half_distances(h), noise_s) {
            out.entry(v).or_default()[h] = e;
        }
    }
    out
}

/// The evidence a kept link's confidence is judged on: its evidence `e` over every set, but no
/// more than twice the smaller of its evidences in the two halves of the sets (`halves`; a
/// link without them is judged on `e`).
///
/// Why: a real link shows in every set, so each half carries about half of its evidence; a
/// link made by a disturbance (a quiet moment that lowered some pairs' minima, a busy one that
/// raised others) shows in the half that held it. Two halves that agree leave the evidence as
/// it is. The minima of 120 live probes of the emulated uneven shape picked the same spurious
/// split of its 4-host switch in both halves 40 times, as often as chance (1 in 3).
fn replicated(e: f64, halves: [f64; 2]) -> f64 {
    e.min(2.0 * halves[0].min(halves[1]).max(0.0))
}

/// Decisions less confident than this are reported at info level.
const UNCERTAIN: f64 = 0.95;

/// Re-measurements of a pair that breaks the triangle inequality before its value is capped.
const TRIANGLE_RETRIES: usize = 2;

/// [`Strategy::AllPairs`]: every pair, one set at a time over the whole round-robin schedule
/// (so a pair's sets are far apart in time and a disturbance spoils at most one of them), pairs
/// that break the triangle inequality measured again, then [`joining::join`]; pairs far above
/// the joined tree measured again and joined once more; a least-squares refit of the link
/// latencies.
///
/// In a tree whose hosts are leaves, `d(i, j) < d(i, k) + d(k, j)` for every other host `k`
/// (by twice `k`'s access link); minima of RTTs can only be inflated (queueing, a descheduled
/// process), so a pair above that bound was inflated: it is measured again, and if it stays
/// above, the bound is used in its place.
/// Pick the statistic of round trips for the jitter measured so far (see `store`) and say so.
fn choose_statistic(store: &mut store::Store) {
    if let Some(ratio) = store.choose_statistic() {
        let shape = format!("jitter shape (p90 - median) / (median - min) = {ratio:.2}");
        match store.statistic() {
            // Unusual on a network (queueing makes jitter skewed): worth saying.
            store::Statistic::Median => {
                log::info!("treecast: {shape}: symmetric, distances are medians of round trips")
            }
            store::Statistic::Min => log::debug!("{shape}: skewed, distances are minima of round trips"),
        }
    }
}

fn all_pairs(run: &mut driver::Run, n: usize) -> Result<joining::Joined, InferError> {
    let rounds = crate::probe::round_robin_rounds(n);
    let spec = run.spec;
    run.spec = PingSpec { sets: 1, ..spec };
    let measured: Result<(), InferError> = (|| {
        for _ in 0..spec.sets.max(1) {
            for round in &rounds {
                run.measure(round)?;
            }
        }
        // A pair whose every pass was given up has no reading yet: at its first round trip
        // (measured again, that is waited for) or before a set's worth (`driver::cut_short`;
        // measured again, stored however it ends). Each such fate comes once per pair.
        for _ in 0..3 {
            let missing: Vec<(usize, usize)> = (0..n)
                .flat_map(|a| ((a + 1)..n).map(move |b| (a, b)))
                .filter(|&(a, b)| run.store.get(a, b).is_none())
                .collect();
            for round in disjoint_rounds(&missing) {
                run.measure(&round)?;
            }
        }
        for _ in 0..TRIANGLE_RETRIES {
            let bad = triangle_violations(n, &run.store);
            if bad.is_empty() {
                break;
            }
            log::debug!("{} pair(s) above the triangle bound; measuring them again", bad.len());
            for round in disjoint_rounds(&bad) {
                run.measure(&round)?;
            }
        }
        Ok(())
    })();
    run.spec = spec;
    measured?;
    choose_statistic(&mut run.store);
    let mut j = join_measured(&run.store, n);
    // A second look: pairs the joined tree explains worst — inflated well beyond the noise, by
    // a moment of contention that hit all of their sets — are measured once more (their
    // minimum can only improve) and the tree is joined again.
    let mut suspects: Vec<(f64, (usize, usize))> = Vec::new();
    for a in 0..n {
        for b in (a + 1)..n {
            let (Some(o), Some(va), Some(vb)) = (run.store.get(a, b), j.tree.vertex_of(a), j.tree.vertex_of(b)) else {
                continue;
            };
            let excess = o.d - j.tree.dist(va, vb);
            if excess > SUSPECT_SIGMAS * j.noise_s.max(f64::MIN_POSITIVE) {
                suspects.push((excess, (a, b)));
            }
        }
    }
    if !suspects.is_empty() {
        suspects.sort_by(|x, y| y.0.total_cmp(&x.0));
        suspects.truncate((n * (n - 1) / 2).div_ceil(10));
        let pairs: Vec<(usize, usize)> = suspects.iter().map(|s| s.1).collect();
        log::debug!(
            "{} pair(s) far above the joined tree; measuring them again",
            pairs.len()
        );
        run.spec = PingSpec { sets: 1, ..spec };
        let again: Result<(), InferError> = disjoint_rounds(&pairs).iter().try_for_each(|r| run.measure(r));
        run.spec = spec;
        again?;
        j = join_measured(&run.store, n);
    }
    // Decisions the data does not settle yet (a link kept or contracted on evidence close to
    // the line): measure every pair once more and join again, until they are settled or the
    // budget of sets is spent. Every pair, not only those deciding the link: the minimum of a
    // set depends on how busy the machine was while it ran (on the emulated cluster whole sets
    // read 1-3 us lower than others), so pairs measured in more or quieter moments than their
    // neighbours would look closer than they are — targeted re-measurement made trees worse.
    let mut sets = spec.sets.max(1);
    loop {
        let open = if sets < MAX_SETS { unsettled(&j, &run.store) } else { 0 };
        if open == 0 {
            break;
        }
        log::debug!("{open} link decision(s) unsettled after {sets} set(s); measuring every pair once more");
        run.spec = PingSpec { sets: 1, ..spec };
        let again: Result<(), InferError> = rounds.iter().try_for_each(|r| run.measure(r));
        run.spec = spec;
        again?;
        sets += 1;
        j = join_measured(&run.store, n);
    }
    lengths::refit(&mut j.tree, &run.store, j.noise_s, 20);
    Ok(j)
}

/// The median length of the links between hosts and their neighbours in `t` (0 without hosts):
/// the scale of [`InferOptions::resolution_of_host_link`].
fn median_host_link(t: &tree::WorkTree) -> f64 {
    joining::median_distance(
        t.hosts()
            .filter_map(|h| t.vertex_of(h))
            .filter_map(|v| t.neighbors(v).first().map(|&w| t.link_len(v, w))),
    )
}

/// Contract every switch-to-switch link of `t` shorter than `resolution` (shortest first; see
/// [`InferOptions::resolution_s`]), each reported as a decision the data could not settle
/// (confidence 0.5).
fn contract_unresolvable(t: &mut tree::WorkTree, resolution: f64) -> Vec<joining::Merged> {
    let mut out = Vec::new();
    loop {
        let short = t
            .switches()
            .filter(|&v| t.parent(v).is_some_and(|p| !t.is_host(p)) && t.len(v) < resolution)
            .min_by(|&a, &b| t.len(a).total_cmp(&t.len(b)).then(a.cmp(&b)));
        let Some(v) = short else { return out };
        log::debug!(
            "contracting the {:.2} us link above {:?}: shorter than the {:.2} us hosts sharing CPUs resolve",
            t.len(v) * 1e6,
            joining::hosts_below(t, v),
            resolution * 1e6
        );
        out.push(joining::Merged {
            hosts_below: joining::hosts_below(t, v),
            len_s: t.len(v),
            // Evidence at the threshold: confidence 0.5 either way.
            evidence: joining::KEEP_EVIDENCE,
            threshold: joining::KEEP_EVIDENCE,
        });
        t.merge_into_parent(v);
    }
}

/// A link decision less confident than this is unsettled: worth measuring every pair again.
const SETTLED: f64 = 0.95;
/// Most sets of every pair, including the first [`PingSpec::sets`].
const MAX_SETS: u32 = 9;

/// How many link decisions of `j` are unsettled (see [`SETTLED`]): a kept link is judged on
/// its [`replicated`] evidence in the sets of `store` so far, so that a link one half of the
/// sets barely shows gets more sets before it is reported (the odd half of three sets is one
/// set, which a busy moment can spoil).
fn unsettled(j: &joining::Joined, store: &store::Store) -> usize {
    let halves = half_evidence(&j.tree, store, j.noise_s);
    j.kept
        .iter()
        .filter(|&&(v, e, t)| {
            let halves = halves.get(&v).copied().unwrap_or([e; 2]);
            joining::confidence(replicated(e, halves), t, true) < SETTLED
        })
        .count()
        + {
            let shortest = joining::shortest_kept(&j.tree, j.kept.iter().map(|k| k.0));
            j.merged
                .iter()
                .filter(|m| joining::contracted_confidence(m, shortest) < SETTLED)
                .count()
        }
}

/// Residual (in noise units) above which a pair is measured again after the first joining.
const SUSPECT_SIGMAS: f64 = 4.0;

/// Join the complete matrix measured so far, each pair capped at its triangle bound.
fn join_measured(store: &store::Store, n: usize) -> joining::Joined {
    let raw = |a: usize, b: usize| {
        if a == b {
            0.0
        } else {
            store.get(a, b).map_or(0.0, |o| o.d)
        }
    };
    let mut d = vec![0.0f64; n * n];
    for a in 0..n {
        for b in 0..n {
            d[a * n + b] = raw(a, b);
        }
    }
    for a in 0..n {
        for b in (a + 1)..n {
            let bound = (0..n)
                .filter(|&k| k != a && k != b)
                .map(|k| raw(a, k) + raw(k, b))
                .fold(f64::INFINITY, f64::min);
            if d[a * n + b] > bound {
                d[a * n + b] = bound;
                d[b * n + a] = bound;
            }
        }
    }
    if log::log_enabled!(log::Level::Debug) {
        let mut csv = String::from("measured one-way distances (us):");
        for a in 0..n {
            csv.push('\n');
            let row: Vec<String> = (0..n).map(|b| format!("{:.2}", d[a * n + b] * 1e6)).collect();
            csv.push_str(&row.join(","));
        }
        log::debug!("{csv}");
    }
    let j = joining::join(n, &|a, b| d[a * n + b]);
    log::debug!(
        "joined: noise {:.3} us, merge threshold {:.3} us, {} switches; evidence of kept links {:?}, of contracted links {:?}",
        j.noise_s * 1e6,
        j.threshold_s * 1e6,
        j.tree.switches().count(),
        j.kept.iter().map(|&(v, e, _)| format!("{:.2}us:{e:.1}", j.tree.len(v) * 1e6)).collect::<Vec<_>>(),
        j.merged.iter().map(|m| format!("{:.2}us:{:.1}", m.len_s * 1e6, m.evidence)).collect::<Vec<_>>()
    );
    j
}

/// Pairs whose distance exceeds the sum over some third host.
fn triangle_violations(n: usize, s: &store::Store) -> Vec<(usize, usize)> {
    let d = |a: usize, b: usize| s.get(a, b).map_or(f64::INFINITY, |o| o.d);
    let mut out = Vec::new();
    for a in 0..n {
        for b in (a + 1)..n {
            let dab = d(a, b);
            if (0..n).any(|k| k != a && k != b && d(a, k) + d(k, b) < dab) {
                out.push((a, b));
            }
        }
    }
    out
}

/// Split `pairs` into rounds in which no host appears twice (greedy, in order).
fn disjoint_rounds(pairs: &[(usize, usize)]) -> Vec<Vec<(usize, usize)>> {
    let mut rounds: Vec<Vec<(usize, usize)>> = Vec::new();
    for &(a, b) in pairs {
        match rounds
            .iter_mut()
            .find(|r| r.iter().all(|&(x, y)| x != a && x != b && y != a && y != b))
        {
            Some(r) => r.push((a, b)),
            None => rounds.push(vec![(a, b)]),
        }
    }
    rounds
}

/// Rounds of more readings between far-apart parts when their graft does not fit. Why 5: a
/// round costs one far round trip (milliseconds); the fallback, one tree over all hosts, 1-3 s.
/// With 2, grafts refused on one-sample readings under Lomax jitter fell back in 4 of 7,200
/// trials of the 6-8-cluster families (seeds 401-1600), with 5 in 2.
const GRAFT_RETRIES: usize = 5;

/// Hosts per independently grown tree when host order is a locality hint.
const GROUP: usize = 32;

/// The insertion orders: with the hint, contiguous blocks of [`GROUP`] hosts (likely one part of
/// the network each) grown as separate trees in shared rounds, then merged; each block's order
/// spreads over the block ([`spread_pairs`]). Without the hint, one random order.
fn insertion_groups(n: usize, hint: bool, rng: &mut crate::util::rng::Rng) -> Vec<Vec<usize>> {
    if !hint {
        let mut o: Vec<usize> = (0..n).collect();
        rng.shuffle(&mut o);
        return vec![o];
    }
    let k = (n / GROUP).max(1);
    (0..k)
        .map(|g| {
            let (lo, hi) = (g * n / k, (g + 1) * n / k);
            let len = hi - lo;
            spread_pairs(len, rng.below(len as u64 / 2 + 1) as usize)
                .into_iter()
                .map(|i| lo + i)
                .collect()
        })
        .collect()
}

/// `0..n` as neighbour pairs `(2p, 2p + 1)`, the pairs in bit-reversed order of `p` rotated by
/// `offset`: every prefix is spread evenly over the host list, so each newly inserted host has
/// an already inserted neighbour in host order about `n / inserted` positions away, and the two
/// hosts of a pair (likely on one switch) come one after the other.
fn spread_pairs(n: usize, offset: usize) -> Vec<usize> {
    let pairs = n.div_ceil(2);
    let bits = pairs.next_power_of_two().trailing_zeros();
    (0..pairs.next_power_of_two())
        .map(|i| {
            if bits == 0 {
                0
            } else {
                i.reverse_bits() >> (usize::BITS - bits)
            }
        })
        .filter(|&p| p < pairs)
        .map(|p| (p + offset) % pairs)
        .flat_map(|p| [2 * p, 2 * p + 1])
        .filter(|&h| h < n)
        .collect()
}

/// Batch-mode tolerances, re-derived from the measurements each round.
///
/// The noise scale is the larger of the typical half jitter interval (how much the minima of two
/// sets differ) and the robust spread of the residuals of the measurements against the trees
/// built so far (which also holds the error of the tree's own link estimates). Snapping follows
/// the interval rule of [Shirai2007] (`kappa` times the two intervals) with a floor of a few noise
/// scales: three sets sometimes agree by chance, and [Shirai2007]'s first error kind (one switch
/// split in several) is exactly an interval that came out too small.
fn batch_params(store: &store::Store, trees: &[&tree::WorkTree]) -> LocateParams {
    let u = store.u_quantile(0.5);
    let sigma = refine::residual_spread(trees, store).map_or(2.0 * u, |r| r.max(u));
    let tol_floor = (4.0 * sigma).max(1e-9);
    let flag_delta = (5.0 * sigma).max(1e-9);
    let access = locate::access_length(trees, store, tol_floor, flag_delta);
    LocateParams {
        exhaustive: false,
        kappa: 2.0,
        tol_floor,
        flag_delta,
        robust: true,
        max_times: 2,
        access,
        mate_d: access.and_then(|a0| locate::mate_distance(trees, a0, flag_delta)),
        hint: false,
    }
}

/// The rule of [Shirai2007]: the branching point snaps to an existing switch within the interval.
fn paper_params(_store: &store::Store) -> LocateParams {
    LocateParams {
        exhaustive: true,
        kappa: 0.5,
        tol_floor: 1e-12,
        flag_delta: 0.0,
        robust: false,
        max_times: 1,
        access: None,
        mate_d: None,
        hint: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::{PairMeasurement, ProbeDump, ReplayProber};

    /// Samples per recorded set: the minimum first, then the protocol's patience of round
    /// trips that do not lower it, so that a replay cuts its sets where they were recorded.
    fn set_len() -> usize {
        1 + PingSpec::default().patience as usize
    }

    /// A dump of six hosts below one switch (round trips of 20 us, a little jitter per pair and
    /// set), more sets of every pair than inference takes, in which hosts 0 and 1 read `short_us` shorter in
    /// the sets `short_in` accepts: a switch above the two where every set shows it, a quiet
    /// moment where only one does.
    fn star_dump(short_us: f64, short_in: &dyn Fn(usize) -> bool) -> ProbeDump {
        let mut ms = Vec::new();
        for set in 0..3 * MAX_SETS as usize {
            for a in 0..6usize {
                for b in (a + 1)..6 {
                    let short = if (a, b) == (0, 1) && short_in(set) {
                        short_us
                    } else {
                        0.0
                    };
                    let floor_us = 20.0 - short + 0.01 * ((a * 7 + b * 3 + set) % 5) as f64;
                    let samples_s = (0..set_len())
                        .map(|k| (floor_us + [0.0, 0.8, 2.5, 0.4][k % 4]) * 1e-6)
                        .collect();
                    ms.push(PairMeasurement {
                        a,
                        b,
                        samples_s,
                        set_len: vec![set_len() as u32],
                        waited_s: 0.0,
                    });
                }
            }
        }
        let hosts = (0..6).map(|h| format!("h{h}")).collect();
        ProbeDump::new(hosts, ms, InferOptions::default().recorded())
    }

    fn replayed(dump: &ProbeDump) -> Inferred {
        let mut p = ReplayProber::new(dump);
        let r = infer(&mut p, &InferOptions::default()).expect("the replay infers");
        assert_eq!(p.reused(), 0, "the dump holds every set inference asks for");
        r
    }

    /// A link only one set shows (a quiet moment lowered one pair's minimum) is not reported
    /// with confidence, however strong its evidence over all the sets; the same link in every
    /// set is. The halves of the sets are the even- and odd-numbered ones.
    #[test]
    fn a_link_one_set_shows_is_reported_as_uncertain() {
        let once = replayed(&star_dump(1.0, &|set| set == 0));
        let d = once.stats.decisions.iter().find(|d| d.hosts_below == ["h0", "h1"]);
        let confidence = once.stats.confidence.expect("a confidence");
        assert!(
            d.is_none_or(|d| d.confidence < 0.5) && confidence < metrics::CONFIDENT,
            "a link seen in one set reads confidence {confidence}: {:?}",
            once.stats.decisions
        );
        // The full evidence alone would have kept it with confidence.
        if let Some(d) = d {
            assert!(d.evidence > joining::KEEP_EVIDENCE + 12.0, "{d:?}");
        }
        let every = replayed(&star_dump(1.0, &|_| true));
        let kept = every
            .stats
            .decisions
            .iter()
            .find(|d| d.kept && d.hosts_below == ["h0", "h1"])
            .expect("the link every set shows is kept");
        assert!(kept.confidence > 0.99, "{kept:?}");
    }

    /// What a dump records gives back the options that change inference, also the infinite
    /// ones JSON cannot write (one tree, never give up), through the dump's own JSON.
    #[test]
    fn recorded_settings_give_back_the_options() {
        for (far, give_up) in [(None, 0.01), (Some(2e-4), f64::INFINITY), (Some(f64::INFINITY), 0.02)] {
            let opts = InferOptions {
                resolution_s: 1e-6,
                far_rtt_s: far,
                led_part_min_hosts: 3,
                ping: PingSpec {
                    give_up_s: give_up,
                    give_up_ratio: 4.0,
                    ..PingSpec::default()
                },
                ..InferOptions::default()
            };
            let dump = crate::probe::ProbeDump::new(vec!["a".into(), "b".into()], Vec::new(), opts.recorded());
            let read = crate::probe::ProbeDump::from_json(&dump.to_json(), "test").expect("the dump reads back");
            let back = InferOptions::default().with_recorded(read.settings.as_ref().expect("settings"));
            assert_eq!(back.resolution_s, 1e-6);
            assert_eq!(back.far_rtt_s, far);
            assert_eq!(back.led_part_min_hosts, 3);
            assert_eq!(back.ping.give_up_s, give_up);
            assert_eq!(back.ping.give_up_ratio, 4.0);
        }
    }
}
