//! Chooses the plan a communicator runs for each (root, size class).
//!
//! Planning must give the identical plan on every rank without communication (a rank whose
//! message size is wrong must still be able to compute the root's plan to take part in error
//! mode), so every input here is identical across ranks and every planner is deterministic.
//!
//! Communicators of more than [`plan::local::FULL_CHOOSER_MAX_RANKS`] ranks (`TREECAST_LOCAL_PLAN_ABOVE`
//! in tests) choose `auto` plans
//! with [`plan::local`]: every rank computes only its own ops (milliseconds at thousands of
//! ranks, memory for its own ops), where the full chooser builds and simulates every rank's
//! (about half a second per (root, size class) at 4,096 ranks). The full plan of such a
//! communicator ([`Planner::plan`], for predictions and profiles) is the one those ops make up.
//! Roots the network cannot tell apart share one choice ([`plan::local::LocalPlanner`]).

use super::config::Config;
use crate::error::Result;
use crate::exec::LocalPlan;
use crate::plan::baselines::Baseline;
use crate::plan::{self, class_max_segments, class_representative, trees, Plan};
use mpi::ffi::MPI_Comm;

/// Planning inputs of one communicator.
pub struct Planner {
    nranks: u32,
    /// Rank-level tree of the communicator, identical on every rank, if known.
    topology: Option<std::sync::Arc<crate::topology::Topology>>,
    /// Where the topology came from.
    source: super::discovery::Source,
    /// Forced algorithm (`TREECAST_ALGORITHM`), if any.
    algorithm: Option<plan::Algorithm>,
    /// Forced segment size (`TREECAST_SEGMENT`), if any.
    segment_bytes: Option<u64>,
    /// Per-message overhead measured at start-up (seconds), if any.
    message_overhead_s: Option<f64>,
    /// The overhead plans charge instead (`TREECAST_MESSAGE_OVERHEAD_US`), if set.
    planning_overhead_s: Option<f64>,
    /// The local planner of large communicators (made on first use): choices shared by the
    /// roots of one orbit.
    local: std::sync::OnceLock<plan::local::LocalPlanner>,
    /// Communicators of more ranks than this are planned by the local planner
    /// ([`Config::local_plan_above`]).
    local_above: usize,
    /// Predictions' costs measured at set-up (`None`: `TREECAST_CALIBRATE=0`, or nothing to
    /// measure and no overhead measured either; predictions then use the topology alone).
    calibrated: Option<Calibrated>,
    /// The (root, size class)es whose calls measured the unsegmented plan faster than the
    /// planner's segments (`runtime::route`'s trial): planned unsegmented from then on.
    unsegmented: std::collections::HashMap<(u32, u8), plan::Algorithm>,
}

/// The unsegmented alternative of a segmented plan is tried against it only where that trial
/// costs little: its predicted time, over the most calls a trial can give it, at most this
/// (seconds). On the emulated 3x3 cluster that admits the 16 and 32 KiB size classes
/// (`hier-pipeline:segs=1` predicted 1.4-2.9 ms at 300 Mbit/s uplinks for their planned 24
/// and 48 KiB) and keeps out 64 KiB and beyond (5.6 ms and more), where the uplinks' token
/// buckets no longer refill a call's bytes between calls.
const UNSEGMENTED_TRIAL_BUDGET_S: f64 = 0.1;

/// What predictions are made with when the job calibrated them (never plans: those keep the
/// topology as acquired, so calibration cannot change which plan runs).
struct Calibrated {
    /// The topology with the measured host-mate path on every rank's host link.
    topology: std::sync::Arc<crate::topology::Topology>,
    /// Per-message CPU time (sender and receiver together): from the token ring's train
    /// between hosts, else the send burst's.
    overhead_s: f64,
    /// What a relay that was idle pays before it takes a message in (between hosts, from the
    /// token ring; 0 on one host, whose models do not use it).
    wake_s: f64,
    /// Between hosts, the CPU time per message each of the ring train's passes gave (the
    /// lesser is `overhead_s`); empty elsewhere.
    cpu_passes_s: Vec<f64>,
    /// Ranks that share CPUs with more ranks than there are (between hosts; `sim::CpuPools`).
    cpu_pools: Option<crate::sim::CpuPools>,
    /// Per-size costs between host-mates: what predicts a job on one host.
    send_curve: Option<crate::estimate::send_curve::SendCurve>,
    /// The pair's costs before `send_curve` was scaled to the library's calls: what
    /// receivers sharing a CPU copy at (`estimate::send_curve::SharedCpus`).
    pair_curve: Option<crate::estimate::send_curve::SendCurve>,
    /// Per size timed at set-up, the ranks' most frequent grouping by CPU in its calls (those
    /// whose every rank's CPU was read): how a call whose own was not read is taken to run.
    setup_groupings: Vec<(u64, Vec<u32>)>,
    /// Token buckets on the tree's slow links (`runtime::burst`), on `topology`'s link ids.
    buckets: Vec<crate::estimate::bucket::LinkBucket>,
    /// Bytes a sender's transport holds unsent between hosts (`runtime::burst`; 0 where not
    /// measured): how soon a rank sending over a slow link leaves a call
    /// (`estimate::send_buffer`).
    send_buffer_bytes: f64,
    /// The library's broadcast timed at set-up on one host (`runtime::library_fit`).
    library_timing: Vec<crate::estimate::curve_fit::LibraryTiming>,
    /// How far apart the set-up's two passes over the host-mates' curve read
    /// (`estimate::calibrate::Calibration::curve_passes_apart`).
    curve_passes_apart: Option<f64>,
    /// The sizes of `library_timing` whose calls the point-to-point model could not reproduce,
    /// fitted as a shared-memory release (`estimate::release`): the library's broadcasts of
    /// those sizes on one host are predicted with it.
    released: Option<crate::estimate::release::ReleaseSizes>,
}

/// Segments for a message of `bytes` cut at `seg` bytes (`TREECAST_SEGMENT`, already at least
/// `plan::pipeline::MIN_SEGMENT_BYTES`): never more than the planners' own limit
/// (`plan::pipeline::MAX_SEGMENTS`) nor than the size class allows. Without the cap a 7-byte
/// segment made a 1 MiB broadcast 150,000 messages and ran for minutes.
fn forced_segments(bytes: u64, seg: u64, class: u8) -> u32 {
    let cap = class_max_segments(class).min(plan::pipeline::MAX_SEGMENTS) as u64;
    bytes.div_ceil(seg.max(1)).clamp(1, cap.max(1)) as u32
}

/// The plan if it was built and fits size class `class`; otherwise `None`, with a warning, and
/// the caller falls back to the default plan (a plan with more segments than the class allows
/// would cut its smallest messages into empty segments).
fn fitting<E: std::fmt::Display>(built: std::result::Result<Plan, E>, class: u8) -> Option<Plan> {
    match built {
        Ok(p) if p.nsegs <= class_max_segments(class) => Some(p),
        Ok(p) => {
            log::warn!(
                "treecast: plan {} has {} segments, more than size class {class} allows; using the default",
                p.info.algorithm,
                p.nsegs
            );
            None
        }
        Err(e) => {
            log::warn!("{e}; using the default");
            None
        }
    }
}

impl Planner {
    /// Collective over `comm` (all ranks call it during state creation).
    pub fn create(comm: MPI_Comm, rank: u32, size: u32, cfg: &Config) -> Result<Planner> {
        let t0 = crate::exec::raw::wtime();
        // SAFETY: comm is our valid duplicate; every rank calls this collectively.
        let super::discovery::Acquired {
            topology,
            source,
            message_overhead_s,
            message_costs,
            calibration,
            burst,
            cpu_pools,
        } = unsafe { super::discovery::acquire(comm, rank, size, cfg)? };
        let mut calibrated = calibrated(topology.as_ref(), cfg.calibrate, message_costs, calibration, burst);
        if let Some(c) = calibrated.as_mut() {
            c.cpu_pools = cpu_pools;
        }
        match &source {
            super::discovery::Source::Unavailable(why) if rank == 0 => {
                log::warn!("treecast: no topology ({why}); plans ignore the network")
            }
            super::discovery::Source::Unavailable(_) => {}
            s => log::info!(
                "treecast: topology from {s:?} in {:.3} s",
                crate::exec::raw::wtime() - t0
            ),
        }
        if let (0, Some(o)) = (rank, cfg.message_overhead_s) {
            log::info!(
                "treecast: plans charge {:.1} us per message, as TREECAST_MESSAGE_OVERHEAD_US sets, whatever the token ring read",
                o * 1e6
            );
        }
        if rank == 0 && topology.is_some() && size as usize > cfg.local_plan_above {
            log::info!(
                "treecast: {size} ranks (more than {}): each rank plans only its own part",
                cfg.local_plan_above
            );
        }
        Ok(Planner {
            nranks: size,
            topology,
            source,
            algorithm: cfg.algorithm,
            segment_bytes: cfg.segment_bytes,
            message_overhead_s,
            local: std::sync::OnceLock::new(),
            local_above: cfg.local_plan_above,
            calibrated,
            unsegmented: Default::default(),
            planning_overhead_s: cfg.message_overhead_s,
        })
    }

    /// The per-message overhead plans are made with (seconds): `TREECAST_MESSAGE_OVERHEAD_US`,
    /// else measured at start-up when the communicator spans hosts, else the planner's default.
    pub fn message_overhead_s(&self) -> f64 {
        self.planning_overhead_s
            .or(self.message_overhead_s)
            .unwrap_or(crate::plan::pipeline::MESSAGE_OVERHEAD_S)
    }

    pub fn describe(&self) -> String {
        let aware = if self.network_topology().is_some() {
            "topology-aware"
        } else {
            "topology-agnostic"
        };
        match &self.algorithm {
            Some(a) => format!("{aware}, forced {a}"),
            None => format!("{aware} auto"),
        }
    }

    /// The topology when it describes a network (two hosts or more): only then can plans
    /// exploit it. Within one host the MPI library's own shared-memory paths are well tuned and
    /// our cost model (no per-message overhead) would favour flat trees there, so the
    /// topology-agnostic default is kept.
    fn network_topology(&self) -> Option<&crate::topology::Topology> {
        let t = self.topology.as_deref()?;
        (t.vertices_of_kind(crate::topology::VertexKind::Node).len() >= 2).then_some(t)
    }

    /// Topology-aware plan from the planning module (`plan::plan_broadcast`), deterministic so
    /// every rank computes the same one; `None` (with a warning) if it fails or does not fit the
    /// size class, in which case the caller falls back to the topology-agnostic plan.
    fn aware_plan(&self, t: &crate::topology::Topology, root: u32, class: u8, algo: plan::Algorithm) -> Option<Plan> {
        if let Some(c) = self.local_choice(t, root, class, algo) {
            return c.map(|c| c.plan(t));
        }
        let bytes = class_representative(class);
        let opts = plan::PlanOptions {
            algorithm: algo,
            segments: self.segment_bytes.map(|seg| forced_segments(bytes, seg, class)),
            message_overhead_s: self.message_overhead_s(),
            ..plan::PlanOptions::default()
        };
        let planned = plan::plan_broadcast(t, root, bytes, &opts)
            .map_err(|e| format!("treecast: topology-aware planning failed ({e})"));
        fitting(planned, class)
    }

    /// The local planner's choice (module docs) when it plans this communicator: `auto` (no
    /// algorithm or segment size forced) on more than `local_above` ranks; `None`
    /// when the full chooser does. Inside, `None` (with a warning) when it fails or its plan
    /// could not run (more segments than the class allows, trees that do not span), and the
    /// caller falls back to the topology-agnostic plan as for the full chooser.
    fn local_choice(
        &self,
        t: &crate::topology::Topology,
        root: u32,
        class: u8,
        algo: plan::Algorithm,
    ) -> Option<Option<plan::local::LocalChoice>> {
        let local = algo == plan::Algorithm::Auto && self.segment_bytes.is_none() && t.num_ranks() > self.local_above;
        if !local {
            return None;
        }
        let bytes = class_representative(class);
        let planner = self.local.get_or_init(|| plan::local::LocalPlanner::new(t));
        Some(match planner.choose(t, root, bytes, self.message_overhead_s()) {
            Ok(c) if c.nsegs > class_max_segments(class) => {
                log::warn!(
                    "treecast: local plan {} has more segments than size class {class} allows; using the default",
                    c.algorithm
                );
                None
            }
            Ok(c) if !c.trees.iter().all(|tr| trees::spans(tr, root)) => {
                log::error!(
                    "treecast: local plan {} does not reach every rank; using the default",
                    c.algorithm
                );
                None
            }
            Ok(c) => Some(c),
            Err(e) => {
                log::warn!("treecast: topology-aware planning failed ({e}); using the default");
                None
            }
        })
    }

    /// `algorithm` (a pipelined family of treecast's, as the planner chose it for (root, size
    /// class)) held to one segment: the same trees, the message whole. `None` unless the
    /// planner plans this class itself (`auto`: no algorithm or segment size forced; the full
    /// chooser, with the network's topology) and the plan is unsegmented and valid. Why the
    /// same family rather than the chooser's best unsegmented plan: the trial then asks one
    /// question, whether cutting the message pays; and on the emulated 3x3 cluster the
    /// chooser's best unsegmented schedule (`optimal`) sent two copies over the root's uplink,
    /// whose token bucket the calls then drained, predicted 2-44% short in 8 jobs, where
    /// `hier-pipeline:segs=1` (each uplink crossed once) was predicted within 25% in 8 of 8.
    fn unsegmented_plan(&self, root: u32, class: u8, algorithm: plan::Algorithm) -> Option<Plan> {
        let t = self.network_topology()?;
        if self.algorithm.is_some() || self.segment_bytes.is_some() || class == 0 || t.num_ranks() > self.local_above {
            return None;
        }
        algorithm.segments()?;
        let opts = plan::PlanOptions {
            algorithm: algorithm.with_segments(1),
            message_overhead_s: self.message_overhead_s(),
            ..plan::PlanOptions::default()
        };
        let p = plan::plan_broadcast(t, root, class_representative(class), &opts).ok()?;
        (p.nsegs == 1 && p.validate().is_ok()).then_some(p)
    }

    /// Rank `me`'s part of the unsegmented plan the route's trial times against `planned`
    /// (`runtime::route::initial`): when `planned` is segmented, the planner has an
    /// unsegmented plan for the class, and that plan's predicted time over a trial's calls
    /// stays within [`UNSEGMENTED_TRIAL_BUDGET_S`].
    pub fn unsegmented_alternative(&self, me: u32, root: u32, class: u8, planned: &LocalPlan) -> Option<LocalPlan> {
        if planned.nsegs <= 1 || self.unsegmented.contains_key(&(root, class)) {
            return None;
        }
        let p = self.unsegmented_plan(root, class, planned.algorithm.parse().ok()?)?;
        let calls = (super::route::TRIAL_MAX_CALLS + 1) as f64;
        let cheap = p
            .info
            .predicted_time_s
            .is_some_and(|s| s * calls <= UNSEGMENTED_TRIAL_BUDGET_S);
        cheap.then(|| LocalPlan::from_plan(&p, me))
    }

    /// The calls of (root, size class) measured the unsegmented plan faster than the planner's
    /// segments: plan the class unsegmented from now on (runs and predictions alike). Every
    /// rank takes the same decision at the same call.
    pub fn settle_unsegmented(&mut self, root: u32, class: u8, algorithm: &str) {
        match algorithm.parse() {
            Ok(a) => {
                self.unsegmented.insert((root, class), a);
            }
            Err(e) => log::error!("treecast: unsegmented plan {algorithm} not kept ({e})"),
        }
    }

    /// Whether the topology describes a network of two hosts or more.
    pub fn has_network(&self) -> bool {
        self.network_topology().is_some()
    }

    /// Whether `TREECAST_ALGORITHM` forces an algorithm.
    pub fn forced_algorithm(&self) -> bool {
        self.algorithm.is_some()
    }

    /// The communicator's rank-level topology, if known.
    pub fn topology(&self) -> Option<&crate::topology::Topology> {
        self.topology.as_deref()
    }

    /// Shared handle to the topology.
    pub fn topology_arc(&self) -> Option<std::sync::Arc<crate::topology::Topology>> {
        self.topology.clone()
    }

    /// The token buckets predictions charge, named by their links' ends (`from -> to`).
    pub fn link_buckets(&self) -> Vec<crate::profile::report::LinkBucketReport> {
        let Some(c) = &self.calibrated else {
            return Vec::new();
        };
        c.buckets
            .iter()
            .filter_map(|b| {
                Some(crate::profile::report::LinkBucketReport {
                    link: bucket_link_name(&c.topology, b)?,
                    depth_bytes: b.bucket.depth_bytes,
                    peak_bps: b.bucket.peak_bps,
                    sustained_bps: b.bucket.sustained_bps,
                })
            })
            .collect()
    }

    /// What predictions take a sender's transport to hold unsent between hosts (`None`
    /// where it was not measured).
    pub fn send_buffer_bytes(&self) -> Option<f64> {
        self.calibrated
            .as_ref()
            .map(|c| c.send_buffer_bytes)
            .filter(|&b| b > 0.0)
    }

    /// The per-message overheads plans and predictions are made with, for the profile; `None`
    /// without a topology (plans then ignore the network and charge no measured overhead).
    pub fn message_overhead_report(&self) -> Option<crate::profile::report::MessageOverheadReport> {
        self.topology.as_ref()?;
        // Predictions take the ring's costs where there is one (`calibrated`), else the
        // host-mates' send burst's overhead.
        let ring = self.message_overhead_s.is_some();
        Some(crate::profile::report::MessageOverheadReport {
            planning_s: self.message_overhead_s(),
            planning_source: match (self.planning_overhead_s, ring) {
                (Some(_), _) => "TREECAST_MESSAGE_OVERHEAD_US",
                (None, true) => "token ring",
                (None, false) => "default",
            }
            .into(),
            prediction_s: self.calibrated.as_ref().map(|c| c.overhead_s),
            prediction_wake_s: self.calibrated.as_ref().filter(|_| ring).map(|c| c.wake_s),
            prediction_passes_s: self
                .calibrated
                .as_ref()
                .filter(|_| ring)
                .map_or(Vec::new(), |c| c.cpu_passes_s.clone()),
            prediction_source: if ring { "token ring" } else { "send burst" }.into(),
            curve_passes_apart: self.calibrated.as_ref().and_then(|c| c.curve_passes_apart),
        })
    }

    /// The library's broadcast timed at set-up, for the profile.
    pub fn library_timing(&self) -> Vec<crate::profile::report::LibraryTimingReport> {
        let Some(c) = &self.calibrated else {
            return Vec::new();
        };
        c.library_timing
            .iter()
            .map(|t| crate::profile::report::LibraryTimingReport {
                bytes: t.bytes,
                pass_median_s: t.pass_median_s.clone(),
                scale: t.scale,
                release: t.release.map(|r| crate::profile::report::ReleaseReport {
                    release_s: r.release_s,
                    copy_s: r.copy_s,
                    root_s: r.root_s,
                    root_waits: r.root_waits,
                }),
                cpu_groups: t
                    .cpu_grouping
                    .iter()
                    .copied()
                    .collect::<Option<Vec<u32>>>()
                    .filter(|g| !g.is_empty())
                    .map(|g| crate::profile::placement::label(&g)),
            })
            .collect()
    }

    /// Where the topology came from.
    pub fn source(&self) -> &super::discovery::Source {
        &self.source
    }

    /// The full plan for (root, size class).
    pub fn plan(&self, root: u32, class: u8) -> Plan {
        let n = self.nranks;
        if n <= 1 {
            return Plan::empty(n, root, "none");
        }
        if let Some(&a) = self.unsegmented.get(&(root, class)) {
            if let Some(p) = self.unsegmented_plan(root, class, a) {
                return p;
            }
        }
        if class == 0 {
            // An empty broadcast still visits every rank (empty messages down a binomial tree),
            // so a rank whose count is not zero finds out the root's is (and the reverse).
            return Plan::from_tree(root, &trees::binomial(n, root), 1, "empty");
        }
        let net = self.network_topology();
        let p = match (self.algorithm, net) {
            (None, Some(t)) => self.aware_plan(t, root, class, plan::Algorithm::Auto),
            (None, None) => None,
            (Some(plan::Algorithm::Library(b)), _) => self.library_algorithm(b, root, class),
            (Some(a), Some(t)) => self.aware_plan(t, root, class, a),
            (Some(a), None) => {
                log::warn!("TREECAST_ALGORITHM={a} plans on the network topology, which is unknown; using the default");
                None
            }
        }
        .unwrap_or_else(|| self.library_plan(root, class));
        match p.validate() {
            Ok(()) => p,
            Err(e) => {
                log::error!("planner produced an invalid plan ({e}); falling back to a binomial tree");
                Plan::from_tree(root, &trees::binomial(n, root), 1, "binomial")
            }
        }
    }

    /// One of the MPI libraries' algorithms forced by name, for the class: `TREECAST_SEGMENT`
    /// sets the segment size of the segmented ones, never into more segments than the class
    /// allows (see [`forced_segments`]). HAN and the topology wave need the topology (the
    /// communicator's ranks are its rank leaves); `None` (with a warning) without one.
    fn library_algorithm(&self, b: Baseline, root: u32, class: u8) -> Option<Plan> {
        let bytes = class_representative(class);
        let b = match self.segment_bytes {
            Some(seg) => b.with_segment(bytes.div_ceil(forced_segments(bytes, seg, class) as u64)),
            None => b,
        };
        let built = match self.topology.as_deref() {
            Some(t) if b.needs_topology() => {
                let ident: Vec<u32> = (0..self.nranks).collect();
                b.build(t, &ident, root, bytes).map_err(|e| e.to_string())
            }
            _ => b
                .build_ranks(self.nranks, root, bytes)
                .ok_or_else(|| "it needs the topology, which is unknown".to_string()),
        };
        fitting(built.map_err(|e| format!("TREECAST_ALGORITHM={b}: {e}")), class)
    }

    /// The plan without a network topology: [`plan::library_plan_for_class`].
    fn library_plan(&self, root: u32, class: u8) -> Plan {
        plan::library_plan_for_class(self.nranks, root, class)
    }

    /// The algorithm the library's `MPI_Bcast` runs for (root, size class) as predictions
    /// model it (its decision table; for the profile's routes).
    pub fn library_algorithm_name(&self, root: u32, class: u8) -> String {
        self.library_plan(root, class).info.algorithm
    }

    /// This rank's part of the plan for (root, size class): from the local planner when it
    /// plans this communicator (only this rank's ops are built), else from the full plan.
    pub fn local_plan(&self, me: u32, root: u32, class: u8) -> LocalPlan {
        if let (None, Some(t), true) = (self.algorithm, self.network_topology(), self.nranks > 1 && class > 0) {
            if let Some(Some(c)) = self.local_choice(t, root, class, plan::Algorithm::Auto) {
                let info = c.info();
                return LocalPlan {
                    root,
                    nsegs: c.nsegs,
                    ops: c.ops(t, me),
                    algorithm: info.algorithm,
                    predicted_time_s: info.predicted_time_s,
                    planned_bytes: info.planned_bytes,
                    library_time_s: info.library_time_s,
                };
            }
        }
        LocalPlan::from_plan(&self.plan(root, class), me)
    }

    /// The plan a prediction is for: the library's algorithm (`plan::library_plan`, Open MPI's
    /// decision table) when the calls took the library's route, else the plan for the class.
    pub fn predicted_plan(&self, root: u32, bytes: u64, library_route: bool) -> Plan {
        let class = crate::plan::size_class(bytes);
        if library_route && class == 0 {
            // Open MPI's and MPICH's MPI_Bcast return at once for an empty message: no message
            // moves (treecast's own empty plan, a binomial tree of empty messages, is not
            // what ran). Predicted as the tree, 0 B calls read 1.99 us against 0.04 measured.
            return self.library_plan(root, 0);
        }
        if library_route && self.calibrated.is_some() && self.nranks > 1 && class > 0 {
            return self.library_plan(root, class);
        }
        self.plan(root, class)
    }

    /// The plan's times with the calibration. Across hosts the flow simulator: a pipeline's
    /// segments queue on the uplinks they share (the contention-free evaluator streamed them all
    /// at once and predicted 0.6 ms for a 4 MiB broadcast the 3x3 cluster's 300 Mbit/s uplinks
    /// need 112 ms for). Within one host, the per-size costs host-mates measured
    /// (`estimate::send_curve`): a latency-bandwidth line with one overhead missed 1-64 KiB
    /// there by -60 .. +120%; but the library's broadcast of a size whose set-up calls were
    /// faster than that model can be, as a shared-memory release (`estimate::release`). Above
    /// 512 ranks (to bound the cost at finalize), or on one host without the curve, the
    /// contention-free evaluator. `found`: the calibrated topology with its token buckets
    /// applied ([`Self::bucketed`]); `library_route`: `p` is the library's algorithm;
    /// `grouping`: which ranks ran on one CPU in the call, where read (on one host,
    /// [`Calibrated::shared_cpus`]).
    #[allow(clippy::too_many_arguments)]
    fn calibrated_times(
        &self,
        c: &Calibrated,
        found: &AsFound<'_>,
        p: &Plan,
        bytes: u64,
        enter: Option<&[f64]>,
        grouping: Option<&[u32]>,
        library_route: bool,
    ) -> Option<crate::estimate::calibrate::CalibratedTimes> {
        use crate::estimate::calibrate::{evaluate_calibrated, simulate_calibrated};
        if p.num_messages() == 0 {
            // Nothing is sent: every rank leaves as it enters. (The one-host release model
            // would have the root wait for every rank: 1.3 ms predicted for 0 B calls that
            // took 1.8 us when one rank entered late.)
            let t = enter.map_or_else(|| vec![0.0; p.nranks as usize], <[f64]>::to_vec);
            return Some(crate::estimate::calibrate::CalibratedTimes::new(t.clone(), t));
        }
        let topology = &*found.topology;
        let released = c.released.as_ref().and_then(|r| r.at(bytes));
        if let (false, true, Some(cost)) = (self.has_network(), library_route, released) {
            let n = p.nranks as usize;
            return crate::estimate::release::evaluate(n, p.root as usize, cost, enter).ok();
        }
        if let (false, Some(curve)) = (self.has_network(), &c.send_curve) {
            let shared = c.shared_cpus(bytes, grouping);
            return crate::estimate::send_curve::evaluate_on_one_host(p, bytes, curve, c.overhead_s, enter, shared)
                .ok();
        }
        if self.nranks > super::config::SIMULATED_RANKS_MAX || !self.has_network() {
            // The contention-free evaluator charges each hop one overhead and cannot tell an
            // idle relay from a busy one: between hosts, a lone token's hop (a woken relay's
            // wake-up and its half of the CPU time).
            let hop = c.overhead_s / if self.has_network() { 2.0 } else { 1.0 } + c.wake_s;
            return evaluate_calibrated(topology, p, bytes, hop, enter).ok();
        }
        // The simulator charges its overhead at the sender and again at the receiver: half of
        // a message's CPU time each.
        let cpu = crate::estimate::calibrate::CpuCosts {
            overhead_s: c.overhead_s / 2.0,
            wake_s: c.wake_s,
            pools: c.cpu_pools.clone(),
        };
        simulate_calibrated(topology, p, bytes, &cpu, enter, c.send_buffer_bytes, &found.buckets).ok()
    }

    /// MPICH's broadcast on one host from a root other than 0: the root first sends the whole
    /// message to rank 0 (`MPIC_Send` in its release-gather broadcast), which then broadcasts
    /// it as from root 0, the root taking part as the others do. So its calls are the set-up's
    /// root-0 broadcast, with rank 0 starting it once the message has come: the plan from
    /// root 0, and [`Forward::entries`] raises rank 0's entry to the root's plus the pair's
    /// one-way time (`None` elsewhere: Open MPI's broadcast starts from any root, which its
    /// plans model). The set-up timed root 0 only, where root 2 of 4 ranks took 6.5-7.1 us at
    /// 1 KiB against 0.2, and 15.4-15.8 ms at 16 MiB against 8.1: the pair's one way, 5.3 us
    /// and 6.7-7.1 ms, accounts for most of each. Resolved once per class by each prediction,
    /// not once per call: the calls of a class share the plan.
    fn forwarding(&self, c: &Calibrated, root: u32, bytes: u64, library_route: bool) -> Option<(Plan, Forward)> {
        if super::library_fit::SENDS_MESSAGES || self.has_network() || !library_route || root == 0 {
            return None;
        }
        let hop_s = c.pair_curve.as_ref().or(c.send_curve.as_ref())?.at(bytes).one_way_s;
        let forward = Forward {
            root: root as usize,
            hop_s,
        };
        Some((self.predicted_plan(0, bytes, library_route), forward))
    }

    /// The plan the calibrated model runs for (root, `bytes`), and how the calls' entries
    /// must be changed for it ([`Self::forwarding`]; `None`: as they are).
    fn modelled_plan(&self, c: &Calibrated, root: u32, bytes: u64, library_route: bool) -> (Plan, Option<Forward>) {
        match self.forwarding(c, root, bytes, library_route) {
            Some((p0, f)) => (p0, Some(f)),
            None => (self.predicted_plan(root, bytes, library_route), None),
        }
    }

    /// The calibrated topology with each token-bucketed link at its rate for calls of `p`
    /// with `bytes` in the train `train` describes (`estimate::bucket`; `None`: a full
    /// bucket). Built once per plan and size, not once per call: the calls of a class share
    /// it. Borrowed as it is without buckets.
    fn bucketed<'a>(
        c: &'a Calibrated,
        p: &Plan,
        bytes: u64,
        train: Option<crate::estimate::bucket::CallTrain>,
    ) -> Option<AsFound<'a>> {
        if c.buckets.is_empty() {
            return Some(AsFound {
                topology: std::borrow::Cow::Borrowed(&*c.topology),
                buckets: Vec::new(),
            });
        }
        crate::estimate::bucket::with_buckets(&c.topology, p, bytes, &c.buckets, train)
            .ok()
            .map(AsFound::from)
    }

    /// The topologies a class's calls of `p` with `bytes` in `train` are predicted on, and how
    /// far between the two to take their times: the one [`Self::bucketed`] gives (weight 0);
    /// but where a token-bucketed link sets the calls' pace, each bucket at the level that
    /// pace leaves it ([`Self::self_paced`]); failing that, where the calls stand near pacing
    /// (`estimate::bucket::plan_drained_weight` strictly between 0 and 1), the buckets full
    /// and drained to the gap's refill, whose times [`Self::times_over`] takes that far apart.
    fn train_topologies<'a>(
        &self,
        c: &'a Calibrated,
        p: &Plan,
        bytes: u64,
        train: Option<crate::estimate::bucket::CallTrain>,
        library_route: bool,
    ) -> Option<(Vec<AsFound<'a>>, f64)> {
        use crate::estimate::bucket::{drained, plan_drained_weight};
        if let Some(t) = train {
            if let Some(charged) = self.self_paced(c, p, bytes, t, library_route) {
                return Some((vec![AsFound::from(charged)], 0.0));
            }
            let w = plan_drained_weight(&c.topology, p, bytes, &c.buckets, Some(t)).ok()?;
            if w > 0.0 && w < 1.0 {
                return Some((
                    vec![
                        Self::bucketed(c, p, bytes, None)?,
                        Self::bucketed(c, p, bytes, Some(drained(t)))?,
                    ],
                    w,
                ));
            }
        }
        Some((vec![Self::bucketed(c, p, bytes, train)?], 0.0))
    }

    /// Where a bucketed link sets the pace of calls of `p` with `bytes` in `train`
    /// (`estimate::bucket::balanced`), the calibrated topology with each bucketed link they use
    /// at the rate its bucket gives them when the calls follow each other as fast as they run:
    /// `estimate::bucket::self_paced_levels`, simulating a call (all ranks entering together)
    /// for each round. Why not the level the measured period's refill gives: a period set by
    /// the link itself refills what the calls use at any level (see there). `None` elsewhere,
    /// or where a call cannot be timed.
    fn self_paced(
        &self,
        c: &Calibrated,
        p: &Plan,
        bytes: u64,
        train: crate::estimate::bucket::CallTrain,
        library_route: bool,
    ) -> Option<crate::estimate::bucket::Charged> {
        use crate::estimate::bucket::{self_paced_levels, sets_the_pace, used_buckets, with_levels};
        let used = used_buckets(&c.topology, p, bytes, &c.buckets).ok()?;
        if !sets_the_pace(&used, train) {
            return None;
        }
        let span = |levels: &[f64]| {
            let found = AsFound::from(with_levels(&c.topology, &used, levels));
            self.calibrated_times(c, &found, p, bytes, None, None, library_route)
                .map(|t| t.completion_s)
        };
        let levels = self_paced_levels(&used, train, span)?;
        log::debug!(
            "{bytes} B calls from root {} in {train:?} pace their buckets: {levels:.0?} B at each start",
            p.root
        );
        Some(with_levels(&c.topology, &used, &levels))
    }

    /// [`Self::calibrated_times`] on each of `topologies` ([`Self::train_topologies`]), taken
    /// `w` of the way from the first to the second when there are two; and then also the two
    /// ends' median rank times (full, drained), which [`Self::paced`] reports without
    /// simulating them again.
    #[allow(clippy::too_many_arguments)]
    fn times_over(
        &self,
        c: &Calibrated,
        (topologies, w): &(Vec<AsFound<'_>>, f64),
        p: &Plan,
        bytes: u64,
        enter: Option<&[f64]>,
        grouping: Option<&[u32]>,
        library_route: bool,
    ) -> Option<(crate::estimate::calibrate::CalibratedTimes, Option<(f64, f64)>)> {
        let mut times = topologies
            .iter()
            .map(|t| self.calibrated_times(c, t, p, bytes, enter, grouping, library_route));
        let first = times.next()??;
        match times.next() {
            None => Some((first, None)),
            Some(second) => {
                let second = second?;
                let ends = (first.rank_median_s, second.rank_median_s);
                crate::estimate::calibrate::CalibratedTimes::between(&first, &second, *w).map(|t| (t, Some(ends)))
            }
        }
    }

    /// With the set-up calibration: for each call of `bytes` from `root` whose ranks entered
    /// at `enters[i]` (seconds, one per rank, any common origin), when each rank leaves it, as
    /// the calibrated model has it (the plan built once for all of them). What a profile sets
    /// against each call's measured times, so the comparison is of the broadcast, not of how the
    /// ranks happened to arrive. `groupings[i]`: which ranks ran on one CPU in call `i`, where
    /// read (`profile::placement::grouping`). `train`: how such calls follow each other (for
    /// token buckets). All `None` uncalibrated.
    pub fn predict_given_entries(
        &self,
        root: u32,
        bytes: u64,
        library_route: bool,
        (enters, groupings): (&[Vec<f64>], &[Option<Vec<u32>>]),
        train: Option<crate::estimate::bucket::CallTrain>,
    ) -> Vec<Option<Vec<f64>>> {
        let Some(c) = self.calibrated.as_ref() else {
            return vec![None; enters.len()];
        };
        let (p, forward) = self.modelled_plan(c, root, bytes, library_route);
        let Some(topologies) = self.train_topologies(c, &p, bytes, train, library_route) else {
            return vec![None; enters.len()];
        };
        enters
            .iter()
            .enumerate()
            .map(|(i, enter)| {
                let origin = enter.iter().copied().fold(f64::INFINITY, f64::min);
                if !origin.is_finite() {
                    return None;
                }
                let shifted: Vec<f64> = enter.iter().map(|t| t - origin).collect();
                let shifted = match &forward {
                    Some(f) => f.entries(Some(&shifted), p.nranks as usize)?,
                    None => shifted,
                };
                let grouping = groupings.get(i).and_then(|g| g.as_deref());
                let (d, _) = self.times_over(c, &topologies, &p, bytes, Some(&shifted), grouping, library_route)?;
                Some(d.rank_done_s.iter().map(|t| t + origin).collect())
            })
            .collect()
    }

    /// Predicted per-rank completion times (seconds after the root starts) of the plan for
    /// `bytes` from `root`, every rank entering with the root (with the set-up calibration:
    /// simulated with its costs, the time each rank leaves the call; else contention-free with
    /// nominal latencies), when the topology is known.
    pub fn predict_arrivals(&self, root: u32, bytes: u64, library_route: bool) -> Option<Vec<f64>> {
        match &self.calibrated {
            Some(c) => {
                let (pm, forward) = self.modelled_plan(c, root, bytes, library_route);
                let enter = forward.and_then(|f| f.entries(None, pm.nranks as usize));
                Self::bucketed(c, &pm, bytes, None)
                    .and_then(|t| self.calibrated_times(c, &t, &pm, bytes, enter.as_deref(), None, library_route))
                    .map(|d| d.rank_done_s)
            }
            None => {
                let p = self.predicted_plan(root, bytes, library_route);
                self.topology
                    .as_deref()
                    .and_then(|t| crate::estimate::evaluate_deterministic(t, &p, bytes).ok())
                    .map(|d| d.rank_arrival_s)
            }
        }
    }

    /// Predicted completion time of a broadcast of `bytes` from `root`: deterministic, and from
    /// the links' latency distributions (Pareto and normal; fitted by probing, else the
    /// estimate module's default tail). With the set-up calibration all of them are on the
    /// calibrated topology, and its per-message overhead gives two more: the median over ranks
    /// of their time in the call (`rank_median_s`, what a profile's median measures) and the
    /// completion (`completion_s`). `library_route`: the calls took the library's `MPI_Bcast`, so its
    /// algorithm is predicted; `train`: how the calls follow each other (for token buckets).
    /// Used when a profile is written, never on the hot path; the distribution models are
    /// skipped above 512 ranks to bound the cost at finalize.
    pub fn predict_time(
        &self,
        root: u32,
        bytes: u64,
        library_route: bool,
        train: Option<crate::estimate::bucket::CallTrain>,
    ) -> Option<crate::profile::report::Predicted> {
        let p = self.predicted_plan(root, bytes, library_route);
        if p.num_messages() == 0 {
            // Nothing is sent (the library's empty broadcast): nothing to wait for, no latency
            // to jitter.
            return Some(crate::profile::report::Predicted {
                pareto_mean_s: Some(0.0),
                pareto_p99_s: Some(0.0),
                normal_mean_s: Some(0.0),
                normal_p99_s: Some(0.0),
                completion_s: self.calibrated.as_ref().map(|_| 0.0),
                rank_median_s: self.calibrated.as_ref().map(|_| 0.0),
                ..Default::default()
            });
        }
        // The distribution models see the token-bucketed links at the rates the calibrated
        // model charges the class, so the jitter they add (the report puts it on the
        // calibrated completion) is over the same links.
        let bucketed = self
            .calibrated
            .as_ref()
            .and_then(|c| Self::bucketed(c, &p, bytes, train));
        let t: &crate::topology::Topology = match (&bucketed, &self.calibrated) {
            (Some(b), _) => &b.topology,
            (None, Some(c)) => &c.topology,
            (None, None) => self.topology.as_deref()?,
        };
        let (calibrated, ends) = self
            .calibrated
            .as_ref()
            .and_then(|c| {
                let (pm, forward) = self.modelled_plan(c, root, bytes, library_route);
                let enter = forward.and_then(|f| f.entries(None, pm.nranks as usize));
                let topologies = self.train_topologies(c, &pm, bytes, train, library_route)?;
                self.times_over(c, &topologies, &pm, bytes, enter.as_deref(), None, library_route)
            })
            .map_or((None, None), |(t, ends)| (Some(t), ends));
        let mut out = if self.nranks > super::config::SIMULATED_RANKS_MAX {
            let d = crate::estimate::evaluate_deterministic(t, &p, bytes).ok()?;
            crate::profile::report::Predicted {
                deterministic_s: d.completion_s,
                ..Default::default()
            }
        } else {
            let pr = crate::estimate::predict_plan_time(t, &p, bytes, &Default::default()).ok()?;
            crate::profile::report::Predicted {
                deterministic_s: pr.deterministic.completion_s,
                pareto_mean_s: Some(pr.pareto.mean_s),
                pareto_p99_s: Some(pr.pareto.p99_s),
                normal_mean_s: Some(pr.normal.mean_s),
                normal_p99_s: Some(pr.normal.p99_s),
                ..Default::default()
            }
        };
        if let Some(c) = calibrated {
            out.completion_s = Some(c.completion_s);
            out.rank_median_s = Some(c.rank_median_s);
        }
        out.paced = self.paced(&p, bytes, library_route, train, ends);
        Some(out)
    }

    /// Where calls of `p` with `bytes` in `train` pace a bucketed link
    /// (`estimate::bucket::paced`): those links and the prediction with their buckets full
    /// and drained to the gap's refill (`ends`: those two median rank times where the
    /// prediction already simulated them, [`Self::times_over`]). `None` elsewhere or
    /// uncalibrated.
    fn paced(
        &self,
        p: &Plan,
        bytes: u64,
        library_route: bool,
        train: Option<crate::estimate::bucket::CallTrain>,
        ends: Option<(f64, f64)>,
    ) -> Option<crate::profile::report::PacedReport> {
        use crate::estimate::bucket::{drained, paced_buckets, sets_the_pace, used_buckets};
        let c = self.calibrated.as_ref()?;
        let t = train?;
        let paced = paced_buckets(&c.topology, p, bytes, &c.buckets, Some(t)).ok()?;
        if paced.is_empty() {
            return None;
        }
        let median = |train| {
            let topo = Self::bucketed(c, p, bytes, train)?;
            self.calibrated_times(c, &topo, p, bytes, None, None, library_route)
                .map(|d| d.rank_median_s)
        };
        let (full_s, drained_s) = match ends {
            Some(e) => e,
            None => (median(None)?, median(Some(drained(t)))?),
        };
        let self_paced = used_buckets(&c.topology, p, bytes, &c.buckets).is_ok_and(|u| sets_the_pace(&u, t));
        Some(crate::profile::report::PacedReport {
            // By bucket index: `link_buckets` drops buckets on unknown links, so its list's
            // indices need not be these.
            links: paced
                .iter()
                .filter_map(|&i| bucket_link_name(&c.topology, c.buckets.get(i)?))
                .collect(),
            full_s,
            drained_s,
            self_paced,
        })
    }

    /// The plan poison travels along when the root itself cannot take part (its own arguments
    /// are bad): a binomial tree, so every rank learns of the failure in log2(n) steps.
    pub fn poison_plan(&self, me: u32, root: u32) -> LocalPlan {
        let p = Plan::from_tree(root, &trees::binomial(self.nranks, root), 1, "poison");
        LocalPlan::from_plan(&p, me)
    }
}

/// A topology as a class's calls find it: the calibrated one, borrowed, without token
/// buckets; else with its bucketed links charged for the class (`estimate::bucket::Charged`:
/// one rate each for the evaluators, the buckets at their levels for the simulator).
struct AsFound<'a> {
    topology: std::borrow::Cow<'a, crate::topology::Topology>,
    buckets: Vec<crate::sim::SimBucket>,
}

impl From<crate::estimate::bucket::Charged> for AsFound<'_> {
    fn from(c: crate::estimate::bucket::Charged) -> Self {
        AsFound {
            topology: std::borrow::Cow::Owned(c.topology),
            buckets: c.buckets,
        }
    }
}

/// A bucketed link direction by its ends' names (`from -> to`); `None` for a link the topology
/// does not have.
fn bucket_link_name(t: &crate::topology::Topology, b: &crate::estimate::bucket::LinkBucket) -> Option<String> {
    (b.link < t.links().len()).then(|| {
        let l = t.link(b.link);
        let (from, to) = if b.forward { (l.a, l.b) } else { (l.b, l.a) };
        format!("{} -> {}", t.vertex(from).name, t.vertex(to).name)
    })
}

/// The predictions' inputs from what the job measured: the topology with the host-mates' path
/// on its host links, and the per-message costs (the ring's when the job spans hosts, else
/// the send burst's overhead). `None` with `TREECAST_CALIBRATE=0`, without a topology, or when
/// nothing was measured.
fn calibrated(
    topology: Option<&std::sync::Arc<crate::topology::Topology>>,
    enabled: bool,
    ring: Option<super::discovery::MessageCosts>,
    measured: Option<crate::estimate::calibrate::Calibration>,
    burst: super::burst::Findings,
) -> Option<Calibrated> {
    let t = topology.filter(|_| enabled)?;
    let super::burst::Findings {
        buckets,
        send_buffer_bytes,
    } = burst;
    if measured.is_none() && ring.is_none() && buckets.is_empty() && send_buffer_bytes.is_none() {
        return None;
    }
    let topology = match measured.as_ref().and_then(|m| m.host_path) {
        Some(p) => std::sync::Arc::new(crate::estimate::calibrate::with_host_links(t, p)),
        None => t.clone(),
    };
    let overhead_s = ring
        .map(|r| r.cpu_s)
        .or(measured.as_ref().map(|m| m.overhead_s))
        .unwrap_or(0.0);
    let wake_s = ring.map_or(0.0, |r| r.wake_s);
    let cpu_passes_s = ring.map_or(Vec::new(), |r| {
        r.cpu_passes_s.iter().copied().filter(|c| *c > 0.0).collect()
    });
    let curve_passes_apart = measured.as_ref().and_then(|m| m.curve_passes_apart);
    let (send_curve, pair_curve, library_timing) = measured.map_or((None, None, Vec::new()), |m| {
        (m.send_curve, m.pair_curve, m.library_timing)
    });
    let released =
        crate::estimate::release::ReleaseSizes::new(library_timing.iter().map(|t| (t.bytes, t.release)).collect());
    let setup_groupings = library_timing
        .iter()
        .filter_map(|t| Some((t.bytes, t.cpu_grouping.iter().copied().collect::<Option<Vec<u32>>>()?)))
        .collect();
    Some(Calibrated {
        topology,
        overhead_s,
        wake_s,
        cpu_passes_s,
        cpu_pools: None,
        send_curve,
        pair_curve,
        setup_groupings,
        buckets,
        send_buffer_bytes: send_buffer_bytes.unwrap_or(0.0),
        library_timing,
        released,
        curve_passes_apart,
    })
}

/// A broadcast the library runs as root 0's after the root forwards the message to rank 0
/// ([`Planner::forwarding`]).
#[derive(Clone, Copy, Debug)]
struct Forward {
    /// The root the calls name.
    root: usize,
    /// The pair's one-way time for the message, root to rank 0.
    hop_s: f64,
}

impl Forward {
    /// The entries root 0's broadcast starts from: `enter` (all 0 where `None`) with rank 0's
    /// raised to the root's entry plus the forward. `None` when `enter` is not one per rank.
    fn entries(&self, enter: Option<&[f64]>, n: usize) -> Option<Vec<f64>> {
        let mut e = enter.map_or_else(|| vec![0.0; n], <[f64]>::to_vec);
        if e.len() != n || self.root >= n {
            return None;
        }
        e[0] = e[0].max(e[self.root] + self.hop_s);
        Some(e)
    }
}

impl Calibrated {
    /// Which ranks share a CPU in a call of `bytes` on one host, for the one-host model: the
    /// call's own `grouping` where read, else the set-up's at the timed size nearest in log2.
    /// `None` where the model does not queue copies: without the pair's unscaled costs (no
    /// library fit), or where the set-up's fit did not model them either, under MPICH, whose
    /// library broadcast sends no messages (`library_fit::SENDS_MESSAGES`): the scale fitted
    /// there already holds whatever queueing the set-up's calls had.
    fn shared_cpus<'a>(
        &'a self,
        bytes: u64,
        grouping: Option<&'a [u32]>,
    ) -> Option<crate::estimate::send_curve::SharedCpus<'a>> {
        if !super::library_fit::SENDS_MESSAGES {
            return None;
        }
        let pair = self.pair_curve.as_ref()?;
        let log = |b: u64| (b.max(1) as f64).log2();
        let setup = || {
            self.setup_groupings
                .iter()
                .min_by(|a, b| (log(a.0) - log(bytes)).abs().total_cmp(&(log(b.0) - log(bytes)).abs()))
                .map(|(_, g)| g.as_slice())
        };
        Some(crate::estimate::send_curve::SharedCpus {
            grouping: grouping.or_else(setup)?,
            pair,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::{forced_segments, Planner};
    use crate::exec::LocalPlan;

    fn planner(topo: crate::topology::Topology) -> Planner {
        Planner {
            nranks: topo.num_ranks() as u32,
            topology: Some(std::sync::Arc::new(topo)),
            source: super::super::discovery::Source::File("test".into()),
            algorithm: None,
            segment_bytes: None,
            message_overhead_s: None,
            planning_overhead_s: None,
            local: Default::default(),
            local_above: crate::plan::local::FULL_CHOOSER_MAX_RANKS,
            calibrated: None,
            unsegmented: Default::default(),
        }
    }

    /// A forwarded broadcast starts root 0's when the message has come from the root, never
    /// earlier than rank 0 itself enters; entries that are not one per rank are refused.
    #[test]
    fn a_forward_raises_rank_0s_entry_to_the_message() {
        // Powers of two, so the sums are exact.
        let f = super::Forward { root: 2, hop_s: 0.25 };
        assert_eq!(f.entries(None, 3), Some(vec![0.25, 0.0, 0.0]));
        assert_eq!(f.entries(Some(&[0.125, 0.0, 0.5]), 3), Some(vec![0.75, 0.0, 0.5]));
        assert_eq!(f.entries(Some(&[2.0, 0.0, 0.5]), 3), Some(vec![2.0, 0.0, 0.5]));
        assert_eq!(f.entries(Some(&[0.0, 0.0]), 3), None);
        assert_eq!(f.entries(None, 2), None);
    }

    /// Above the full chooser's size every rank builds only its own ops: they are its row of the
    /// communicator's full plan (which is valid), for short and long messages and any root.
    #[test]
    fn large_communicators_plan_each_ranks_part_alone() {
        let topo = crate::topology::gen::Tree::oversubscribed(16, 16, 4.0)
            .with_ranks(4)
            .build()
            .unwrap();
        let n = topo.num_ranks() as u32;
        assert!(n as usize > crate::plan::local::FULL_CHOOSER_MAX_RANKS);
        let p = planner(topo);
        for root in [0, 517] {
            for bytes in [1000u64, 64 << 10, 4 << 20] {
                let class = crate::plan::size_class(bytes);
                let full = p.plan(root, class);
                full.validate().unwrap();
                assert!(!full.info.algorithm.starts_with("mpi:"), "{}", full.info.algorithm);
                for me in [0, 1, root, 511, n - 1] {
                    assert_eq!(p.local_plan(me, root, class), LocalPlan::from_plan(&full, me));
                }
            }
        }
        // The empty class keeps its binomial tree.
        assert_eq!(p.local_plan(3, 0, 0), LocalPlan::from_plan(&p.plan(0, 0), 3));
    }

    #[test]
    fn a_forced_segment_never_makes_more_than_the_planners_limit() {
        let mib = 1u64 << 20;
        let class = crate::plan::size_class(mib);
        assert_eq!(forced_segments(mib, 128 * 1024, class), 8);
        // 7 bytes (raised to 4 KiB by the configuration) or even 1 byte: capped.
        assert_eq!(forced_segments(mib, 4096, class), 256);
        assert_eq!(forced_segments(mib, 1, class), crate::plan::pipeline::MAX_SEGMENTS);
        // Small messages: never more segments than their class allows, never none.
        assert_eq!(forced_segments(3, 1, crate::plan::size_class(3)), 2);
        assert_eq!(forced_segments(0, 4096, 0), 1);
    }

    /// A planner of 4 ranks on one host, calibrated with one send curve (every size costing
    /// 1 us to send, 5 us one way, 1 us for a late receiver) and `overhead_s` per send.
    fn one_host_calibrated(waits_for_receiver: bool, overhead_s: f64) -> Planner {
        use crate::estimate::send_curve::{SendCost, SendCurve};
        let cost = |bytes: u64| SendCost {
            bytes,
            sender_s: 1e-6,
            one_way_s: 5e-6,
            late_recv_s: 1e-6,
            waits_for_receiver,
        };
        let curve = SendCurve::new(vec![cost(8), cost(1 << 20)]).unwrap();
        let topo = super::super::discovery::single_host("h", 4);
        let mut p = planner(topo.clone());
        p.calibrated = Some(super::Calibrated {
            cpu_passes_s: Vec::new(),
            topology: std::sync::Arc::new(topo),
            overhead_s,
            wake_s: 0.0,
            cpu_pools: None,
            send_curve: Some(curve.clone()),
            pair_curve: Some(curve),
            setup_groupings: Vec::new(),
            buckets: Vec::new(),
            send_buffer_bytes: 0.0,
            library_timing: Vec::new(),
            released: None,
            curve_passes_apart: None,
        });
        p
    }

    #[test]
    fn mpich_from_another_root_is_a_send_to_rank_0_then_root_0s_broadcast() {
        let p = one_host_calibrated(false, 0.0);
        let predict = |root: u32, enter: Vec<f64>| {
            p.predict_given_entries(root, 1024, true, (&[enter], &[None]), None)[0]
                .clone()
                .unwrap()
        };
        let from_2 = predict(2, vec![0.0, 0.0, 1e-6, 0.0]);
        if super::super::library_fit::SENDS_MESSAGES {
            // Open MPI starts from any root: no forward.
            assert_ne!(from_2, predict(0, vec![6e-6, 0.0, 1e-6, 0.0]));
            return;
        }
        // Root 2 entered at 1 us; its message reaches rank 0 one way (5 us) later, and rank 0
        // broadcasts from there as root 0 does.
        assert_eq!(from_2, predict(0, vec![6e-6, 0.0, 1e-6, 0.0]));
        assert!(from_2.iter().all(|&t| t >= 6e-6), "{from_2:?}");
        // Rank 0 entering after the message came starts from its own entry.
        assert_eq!(
            predict(2, vec![9e-6, 0.0, 1e-6, 0.0]),
            predict(0, vec![9e-6, 0.0, 1e-6, 0.0])
        );
    }

    /// The library returns at once from an empty broadcast: calls of 0 B through it are
    /// predicted to move nothing, each rank leaving as it enters, however late one enters
    /// (the one-host model once had them wait 1.3 ms for a late rank, and 2 us together).
    #[test]
    fn the_librarys_empty_broadcast_is_predicted_to_move_nothing() {
        let p = one_host_calibrated(true, 1e-6);
        let enter = vec![0.0, 1e-6, 2e-6, 1.3e-3];
        let got = p.predict_given_entries(0, 0, true, (std::slice::from_ref(&enter), &[None]), None);
        assert_eq!(got, vec![Some(enter.clone())]);
        let t = p.predict_time(0, 0, true, None).unwrap();
        assert_eq!((t.comparable_s(), t.completion()), (0.0, 0.0));
        // treecast's own empty plan still visits every rank (empty messages down a tree).
        let own = p.predict_given_entries(0, 0, false, (std::slice::from_ref(&enter), &[None]), None);
        assert_ne!(own, vec![Some(enter)]);
    }

    #[test]
    fn a_call_without_its_grouping_is_taken_to_run_as_the_set_up_nearest_in_size() {
        use crate::estimate::send_curve::{SendCost, SendCurve};
        let cost = |bytes: u64| SendCost {
            bytes,
            sender_s: 1e-6,
            one_way_s: 1e-6,
            late_recv_s: 1e-6,
            waits_for_receiver: true,
        };
        let pair = SendCurve::new(vec![cost(8), cost(1 << 20)]).unwrap();
        let topo = crate::topology::gen::Tree::oversubscribed(1, 3, 1.0).build().unwrap();
        let mut c = super::Calibrated {
            cpu_passes_s: Vec::new(),
            topology: std::sync::Arc::new(topo),
            overhead_s: 0.0,
            wake_s: 0.0,
            cpu_pools: None,
            send_curve: Some(pair.clone()),
            pair_curve: Some(pair),
            setup_groupings: vec![(1024, vec![0, 0, 2]), (1 << 20, vec![0, 1, 1])],
            buckets: Vec::new(),
            send_buffer_bytes: 0.0,
            library_timing: Vec::new(),
            released: None,
            curve_passes_apart: None,
        };
        let grouping = |bytes, own: Option<&[u32]>| c.shared_cpus(bytes, own).map(|s| s.grouping.to_vec());
        if !super::super::library_fit::SENDS_MESSAGES {
            // MPICH: the set-up's fit does not queue copies, so neither do predictions.
            assert_eq!(grouping(4096, None), None);
            return;
        }
        assert_eq!(grouping(4096, None), Some(vec![0, 0, 2]));
        assert_eq!(grouping(512 << 10, None), Some(vec![0, 1, 1]));
        assert_eq!(grouping(4096, Some(&[0, 1, 0])), Some(vec![0, 1, 0]));
        c.pair_curve = None;
        assert_eq!(c.shared_cpus(4096, None).map(|s| s.grouping.to_vec()), None);
    }
}
