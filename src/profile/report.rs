//! The profile file (JSON): what `TREECAST_PROFILE` writes and `treecast report` reads.

use serde::{Deserialize, Serialize};

/// Version of the profile format.
pub const PROFILE_VERSION: u32 = 1;

/// The whole profile of a job.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProfileReport {
    pub version: u32,
    pub world_size: u32,
    /// The MPI library the job ran (`Open MPI` or `MPICH`; empty in older profiles): the
    /// library's own `MPI_Bcast` is predicted with Open MPI's algorithms, which is what only
    /// Open MPI runs.
    #[serde(default)]
    pub mpi_library: String,
    pub communicators: Vec<CommReport>,
}

/// One communicator's profile.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CommReport {
    pub label: String,
    pub size: u32,
    /// Host name of each rank of the communicator.
    pub hosts: Vec<String>,
    /// World rank of each rank of the communicator.
    pub world_ranks: Vec<i32>,
    pub sites: Vec<SiteReport>,
    /// Each rank's profiling clock and how well it is known (one entry per rank, by rank).
    #[serde(default)]
    pub clocks: Vec<RankClock>,
    /// The route of every (root, size class) broadcast on this communicator (the same on every
    /// rank), and why.
    #[serde(default)]
    pub routes: Vec<RouteReport>,
    /// Kernels on which this communicator's ranks outnumber the CPUs they may use: there a
    /// rank also waits for a core, which the per-message model does not see (on one host of 3
    /// or more ranks the predictions follow the library broadcasts timed at set-up).
    #[serde(default)]
    pub shared_cpus: Vec<SharedCpus>,
    /// Token buckets the set-up burst probe found on the network's slow links (what
    /// predictions charge a burst; `runtime::burst`, `estimate::bucket`). Always written:
    /// reports also travel between ranks in postcard, which cannot skip a field.
    #[serde(default)]
    pub link_buckets: Vec<LinkBucketReport>,
    /// Bytes a sender's transport held unsent between hosts, read by the same probe
    /// (`estimate::send_buffer`): predictions let a rank that sends across hosts leave the
    /// call once what it has not yet sent fits. `None` where not measured.
    #[serde(default)]
    pub send_buffer_bytes: Option<f64>,
    /// The library's broadcast timed at set-up, per size, where the communicator is one host
    /// of three ranks or more, two under MPICH (`runtime::library_fit`): what one-host predictions are scaled
    /// to. Empty elsewhere.
    #[serde(default)]
    pub library_timing: Vec<LibraryTimingReport>,
    /// The per-message overhead this communicator's plans and predictions were made with
    /// (`None` without a topology, or in profiles written before it was recorded). Plans, and
    /// so predictions, follow it: it is the one set-up reading that can change which plan a
    /// size runs from one job to the next.
    #[serde(default)]
    pub message_overhead: Option<MessageOverheadReport>,
    /// Per kernel of the ranks, what else ran on it while the job did (`profile::host_load`);
    /// empty where not read, or in profiles written before.
    #[serde(default)]
    pub host_load: Vec<HostLoadReport>,
}

/// What ran on one kernel (a machine, or the emulated hosts sharing one) between the
/// communicator's set-up and its gather, in CPUs (CPU seconds per second).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HostLoadReport {
    /// The ranks' host names on the kernel.
    pub hosts: Vec<String>,
    pub ranks: u32,
    /// CPUs online on the kernel.
    pub cpus: u32,
    pub window_s: f64,
    /// User time of the job's ranks there.
    pub job_cpus: f64,
    /// User time of everything else there.
    pub other_cpus: f64,
    /// Time the hypervisor took from the kernel's CPUs.
    pub steal_cpus: f64,
}

impl HostLoadReport {
    /// Whether the ranks had to share their CPUs while the job ran: the hypervisor took at
    /// least `host_load::SHARED_FROM_CPUS` of one, or other programs did and could not all
    /// have run beside the ranks on CPUs of their own (ranks and their work outnumber the
    /// CPUs). A node with idle cores running another program on them is not shared.
    pub fn shared(&self) -> bool {
        let from = crate::profile::host_load::SHARED_FROM_CPUS;
        let crowded = f64::from(self.ranks) + self.other_cpus > f64::from(self.cpus);
        (self.other_cpus >= from && crowded) || self.steal_cpus >= from
    }

    /// "h000 .. h008" or the one name: the kernel's hosts.
    pub fn hosts_label(&self) -> String {
        match &self.hosts[..] {
            [] => "?".into(),
            [one] => one.clone(),
            [first, .., last] => format!("{first} .. {last}"),
        }
    }
}

/// Per-message overhead (LogP's o): what the planner charged each message, and what the
/// calibrated predictions charged.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MessageOverheadReport {
    pub planning_s: f64,
    /// `token ring` (measured between hosts at set-up) or `default` (one host: no ring).
    pub planning_source: String,
    /// Per message, the CPU time of sender and receiver together. `None`: predictions
    /// uncalibrated (`TREECAST_CALIBRATE=0`, or nothing measured).
    pub prediction_s: Option<f64>,
    /// Between hosts: what a relay that was idle pays before it takes a message in (the ring's
    /// lone token less half of `prediction_s`). `None` on one host, or in profiles written
    /// before it was measured (predictions then charged `prediction_s` to every message).
    #[serde(default)]
    pub prediction_wake_s: Option<f64>,
    /// Between hosts: what each pass of the ring's train gave as `prediction_s` (two passes
    /// about a second apart; `prediction_s` is the lesser). Empty on one host or in profiles
    /// written before the second pass.
    #[serde(default)]
    pub prediction_passes_s: Vec<f64>,
    /// `token ring`, or `send burst` (host-mates' back-to-back sends, on one host).
    pub prediction_source: String,
    /// Where two ranks share a host: how far apart the set-up's two passes over their
    /// per-size costs read (the median over 1 KiB .. 2 MiB of the slower one-way time over the
    /// faster; the costs keep the lesser of each). `None` where not measured, or in profiles
    /// written before the second pass.
    #[serde(default)]
    pub curve_passes_apart: Option<f64>,
}

/// One size of the library's broadcast timed at set-up.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LibraryTimingReport {
    pub bytes: u64,
    /// Per pass: the median over calls of the median rank's time in the call (below 4 KiB
    /// under Open MPI, of the ranks that waited for their data: `curve_fit::Over`).
    pub pass_median_s: Vec<f64>,
    /// The factor the host-mates' costs were scaled by (`None`: no fit).
    pub scale: Option<f64>,
    /// Where that factor is at or near its lower limit, the calls fitted as a shared-memory
    /// release (`estimate::release`), which predicts the library's broadcasts of this size.
    #[serde(default)]
    pub release: Option<ReleaseReport>,
    /// The ranks sharing a CPU in most of these calls (`profile::placement::label`, e.g.
    /// `1+2`; `None`: not read).
    #[serde(default)]
    pub cpu_groups: Option<String>,
}

impl LibraryTimingReport {
    /// How the job's calls of this size ran against these set-up readings: `measured /
    /// set-up` (the median over the passes), where it lies more than a factor of 1 + the
    /// passes' own spread (`curve_fit::PASS_SPREAD`: 1.25) from 1 either way; `None` within
    /// it or without a reading. On one host the predictions reproduce these readings, so
    /// beyond it the host ran the size at another speed than when it was calibrated
    /// (`treecast report` notes the misses it explains, `predict_bench` lists the sizes).
    pub fn host_change(&self, measured_median_s: f64) -> Option<f64> {
        let spread = crate::estimate::curve_fit::PASS_SPREAD;
        let read: Vec<f64> = self
            .pass_median_s
            .iter()
            .copied()
            .filter(|x| x.is_finite() && *x > 0.0)
            .collect();
        if read.is_empty() || measured_median_s.is_nan() || measured_median_s <= 0.0 {
            return None;
        }
        let ratio = measured_median_s / crate::estimate::calibrate::median(&read);
        (!(1.0 / (1.0 + spread)..=1.0 + spread).contains(&ratio)).then_some(ratio)
    }
}

/// A library broadcast of one size modelled as a shared-memory release (seconds).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ReleaseReport {
    /// From the root's entry to the data's release.
    pub release_s: f64,
    /// A receiver's time once both it and the data are there.
    pub copy_s: f64,
    /// The root's time in the call, or with `root_waits` after the last receiver left.
    pub root_s: f64,
    pub root_waits: bool,
}

/// A token bucket on one direction of a link.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LinkBucketReport {
    /// `from -> to`, by the topology's vertex names.
    pub link: String,
    /// Bytes that pass at the peak rate after a rest.
    pub depth_bytes: f64,
    /// Bytes per second while the bucket holds tokens, then once they are spent.
    pub peak_bps: f64,
    pub sustained_bps: f64,
}

/// Ranks of one communicator on one kernel (a host, or emulated hosts sharing a machine)
/// that outnumber its CPUs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SharedCpus {
    /// Host names of those ranks (several when emulated hosts share the kernel).
    pub hosts: Vec<String>,
    pub ranks: u32,
    pub cpus: u32,
}

/// How one (root, size class) travels: treecast's plan or the library's `MPI_Bcast`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RouteReport {
    pub root: u32,
    pub class: u8,
    pub min_bytes: u64,
    pub max_bytes: u64,
    /// `library`, `plan`, or `trial` (still being measured when the profile was written).
    pub route: String,
    pub reason: String,
    /// A trial's deciding times (slowest rank's medians), microseconds.
    pub library_us: Option<f64>,
    pub plan_us: Option<f64>,
    /// The deciding times of a trial of the planner's segmented plan against its unsegmented
    /// one (slowest rank's medians, microseconds), if there was one (`runtime::route`).
    #[serde(default)]
    pub segmented_us: Option<f64>,
    #[serde(default)]
    pub unsegmented_us: Option<f64>,
    /// What the route runs: the plan's algorithm (`hier-pipeline:segs=4`), or on the library
    /// route the library's algorithm as predictions model it (`ompi:binomial`). Plans follow
    /// the per-message overhead measured at set-up, so two jobs may run different plans for
    /// one size; empty in profiles written before it was recorded.
    #[serde(default)]
    pub algorithm: String,
}

/// One rank's profiling clock: how its ticks became seconds, and the error bounds of the times
/// it contributed. A duration `d` measured on this rank is right to within `d * rate_error`;
/// an absolute time, once put on rank 0's time base, to within `offset_error_s`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RankClock {
    pub rank: u32,
    /// `tsc` (the CPU's invariant time-stamp counter) or `monotonic` (clock_gettime).
    pub source: String,
    pub ns_per_tick: f64,
    /// Bound on the relative error of the rate, from the calibration at set-up.
    pub rate_error: f64,
    /// The same bound re-measured at finalize over the whole job (smaller for longer jobs).
    pub rate_error_at_finalize: f64,
    /// Add to this rank's `MPI_Wtime` to get rank 0's (measured when the profile was
    /// gathered), and the bound on the error of this rank's times once on rank 0's time base:
    /// the larger of the two offset measurements' (half their round trips).
    pub offset_s: f64,
    pub offset_error_s: f64,
    /// The offset measured when the communicator's profiling started (absent in profiles
    /// written before it was measured; `null` when it could not be). Never skipped when
    /// absent: reports travel between ranks in postcard, which has no field names.
    #[serde(default)]
    pub offset_at_setup_s: Option<f64>,
    /// The drift between the two offsets, microseconds per second, by which times in between
    /// were mapped (0 when the interval was too short or the drift implausible; see
    /// `profile::offset`).
    #[serde(default)]
    pub drift_ppm: Option<f64>,
    /// How the offset was found: `reference` (rank 0), `ping-pong` (Cristian's algorithm with
    /// rank 0), `same kernel` (both ranks' `MPI_Wtime` against the kernel clock they share,
    /// to tens of nanoseconds; `profile::offset`), or `same counter` (the rank reads rank 0's
    /// time-stamp counter and its times were converted with rank 0's line from ticks to
    /// seconds, so they are on rank 0's base with no offset; the bound is the two reads' cost;
    /// `profile::gather`). Empty in profiles written before it was recorded.
    #[serde(default)]
    pub offset_method: String,
}

/// Summary statistics of durations, seconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TimeStats {
    pub min_s: f64,
    pub median_s: f64,
    pub p99_s: f64,
    pub max_s: f64,
    pub mean_s: f64,
}

/// Predicted completion time of a broadcast of one message size from one root (the plan the
/// runtime uses for that size class).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Predicted {
    /// Contention-free deterministic prediction from link latencies and bandwidths.
    pub deterministic_s: f64,
    pub pareto_mean_s: Option<f64>,
    pub pareto_p99_s: Option<f64>,
    pub normal_mean_s: Option<f64>,
    pub normal_p99_s: Option<f64>,
    /// With the set-up calibration (`runtime::calibrate`): the median over ranks of their
    /// predicted time in the call, all entering together. The profile's measured median is a
    /// median of per-rank durations, so this is the figure to compare it with.
    #[serde(default)]
    pub rank_median_s: Option<f64>,
    /// With the set-up calibration: the time the last rank leaves the call, by the same model
    /// (`deterministic_s` and the distributions charge no per-message overhead).
    #[serde(default)]
    pub completion_s: Option<f64>,
    /// Where the class's calls come about as fast as a token-bucketed link carries their
    /// bytes (`estimate::bucket::paced`): whether the bucket refills between calls decides
    /// their time, and the medians the prediction rests on cannot tell (`rank_median_s` and
    /// `completion_s` lie between these two cases: at the levels the calls' own pace leaves
    /// where the links set it, else `estimate::bucket::drained_weight` of the way from full
    /// to drained). `None` elsewhere.
    #[serde(default)]
    pub paced: Option<PacedReport>,
}

/// The range a paced class's prediction spans (see [`Predicted::paced`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PacedReport {
    /// The links (`from -> to`) whose buckets the calls pace.
    pub links: Vec<String>,
    /// The median rank's predicted time with those buckets full at every call, and with each
    /// refilled only by the gap between calls.
    pub full_s: f64,
    pub drained_s: f64,
    /// Whether the links set the calls' pace (`estimate::bucket::balanced`), so the prediction
    /// took each bucket's level from the pace the model gives the calls
    /// (`estimate::bucket::self_paced_levels`) rather than between the two times.
    #[serde(default)]
    pub self_paced: bool,
}

impl Predicted {
    /// The prediction comparable with a measured median of per-rank call durations:
    /// `rank_median_s` when calibrated, else the completion time.
    pub fn comparable_s(&self) -> f64 {
        self.rank_median_s.unwrap_or(self.deterministic_s)
    }

    /// The predicted completion: calibrated when the job calibrated, else `deterministic_s`.
    pub fn completion(&self) -> f64 {
        self.completion_s.unwrap_or(self.deterministic_s)
    }

    /// `comparable_s / measured - 1` (`None` when `measured_s` is not positive).
    pub fn error(&self, measured_s: f64) -> Option<f64> {
        crate::estimate::calibrate::relative_error(self.comparable_s(), measured_s)
    }
}

/// Timings of MPI_Bcast on the same data (every Nth call).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Compare {
    /// Calls compared (per rank).
    pub calls: u64,
    pub mpi_bcast_median_s: f64,
    pub topo_bcast_median_s: f64,
    /// topo_bcast / MPI_Bcast.
    pub ratio: f64,
}

/// One rank's part of the sample call.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RankTiming {
    pub rank: u32,
    /// Entry and completion on rank 0's clock, relative to the root's entry (seconds).
    pub enter_s: f64,
    pub done_s: f64,
    /// Predicted time the rank leaves the call, relative to the root's entry: from the times
    /// the call's ranks entered where [`SampleCall::predicted_from_entries`], else with every
    /// rank entering with the root.
    pub predicted_done_s: Option<f64>,
}

/// The last call made from a site, per rank (a Gantt chart of one call).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SampleCall {
    pub seq: u64,
    pub root: u32,
    pub bytes: u64,
    pub algorithm: String,
    pub ranks: Vec<RankTiming>,
    /// The predictions start from the times this call's ranks entered (the calibrated model,
    /// `profile::entries`); false: every rank entering with the root (older profiles, or no
    /// calibration), so a rank that came late may show a prediction before its entry.
    #[serde(default)]
    pub predicted_from_entries: bool,
}

/// One site's calls of one message-size class, merged over ranks, with the prediction for that
/// class: the runtime plans per size class, so this is where predicted and measured times are
/// comparable (a site broadcasting several sizes has one entry per class).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SizeClassReport {
    /// `plan::size_class`: messages of `min_bytes ..= max_bytes` (class 0: empty messages).
    pub class: u8,
    pub min_bytes: u64,
    pub max_bytes: u64,
    /// Calls of this class (per rank) and their bytes (per rank).
    pub calls: u64,
    pub bytes: u64,
    /// Calls summed over ranks.
    pub rank_calls: u64,
    /// Per-rank call durations of this class, all ranks merged.
    pub time: TimeStats,
    /// Calls per root.
    pub roots: Vec<(u32, u64)>,
    /// Message size and root the prediction is for: the class's mean message size (rounded;
    /// one plan serves the class, and its time grows about linearly with size within it) and
    /// its most frequent root (smallest on ties).
    pub predicted_bytes: u64,
    pub predicted_root: u32,
    pub predicted: Option<Predicted>,
    /// Prediction error against the measured median: `predicted / time.median_s - 1` with the
    /// comparable prediction ([`Predicted::comparable_s`]); 0.25 is 25% too slow a prediction.
    #[serde(default)]
    pub prediction_error: Option<f64>,
    /// The same model applied to the calls every rank timed, each from the times its ranks
    /// entered (see `profile::entries`); `None` without the set-up calibration or such calls.
    /// (Always written, `null` when absent: reports also travel between ranks in postcard,
    /// which has no field names, so a skipped field would shift every later one.)
    #[serde(default)]
    pub given_entries: Option<GivenEntries>,
    /// Which ranks shared a CPU in the calls every rank timed, against the set-up's calls of
    /// the class's size (`profile::placement`); `None` where no call's CPUs were all read.
    #[serde(default)]
    pub cpu_groups: Option<CpuGroups>,
    /// Of `calls`, those whose previous broadcast on the communicator was of another size
    /// class (`ClassStats::after_other_size`; the same on every rank).
    #[serde(default)]
    pub calls_after_other_size: u64,
}

/// Which ranks shared a CPU in a size class's calls every rank timed (groupings as
/// `profile::placement::label` writes them), and in the set-up's calls of its size.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuGroups {
    /// The most frequent grouping in the class's calls, counting as one the groupings that put
    /// ranks of the same roles in the plan together (the root with either leaf of a 3-rank
    /// tree); the first such call's.
    pub most_calls: String,
    /// Calls whose every rank's CPU was read.
    pub known_calls: u64,
    /// Of those, calls in `most_calls` or one like it.
    pub most_calls_count: u64,
    /// The set-up's most frequent grouping at the class's size (`None`: not timed there, or
    /// not read), and how many of the class's calls ran in it or one like it.
    pub setup: Option<String>,
    pub setup_count: u64,
}

impl CpuGroups {
    /// Whether most of the class's calls ran in another grouping than the set-up's calls of
    /// its size: the scale fitted there need not hold for them (`profile::placement`).
    pub fn unlike_setup(&self) -> bool {
        self.setup.is_some() && 2 * self.setup_count < self.known_calls
    }
}

/// Predicted against measured per-rank times in the call over a size class's calls that every
/// rank timed, each call predicted from its own ranks' entry times.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GivenEntries {
    /// Calls compared.
    pub calls: u64,
    /// Median per-rank time in the call, measured and predicted, over those calls.
    pub measured_median_s: f64,
    pub predicted_median_s: f64,
    /// `predicted / measured - 1`.
    pub error: Option<f64>,
    /// The rank whose median time in the call the model gets most wrong, and that error
    /// (`predicted / measured - 1` of its medians); `None` in older profiles.
    ///
    /// Why: the median over every rank's time can be right while a rank is not. 4 Open MPI
    /// ranks on one host, 256 KiB (Open MPI's linear broadcast), 36 jobs on 2026-12-02: the
    /// median within 25% in 26 of them, while rank 3 was predicted 50-330% slow in 28 of
    /// them, and the median over each call's mean time (which counts every rank) was within
    /// 25% in only 11.
    #[serde(default)]
    pub worst_rank: Option<(u32, f64)>,
}

/// The fewest of a class's latest calls whose median [`GivenEntries::moved`] sets against all
/// its timed calls': the median of a handful is no reading of the job's state (a test
/// program's single 1-byte call read 44 us against 5 us for all its calls).
pub const MOVED_MIN_CALLS: u64 = 16;

impl GivenEntries {
    /// How far these calls' measured median lies from `all_median_s`, the median of all the
    /// class's timed calls (`measured / all - 1`), where it lies more than a factor of 1.25
    /// away either way and they are at least [`MOVED_MIN_CALLS`]; `None` otherwise. There the
    /// class's own calls moved within the job by as much as a prediction may be off
    /// (`treecast report` notes it, `predict_bench` lists it); beyond [`APART_FACTOR`] no one
    /// prediction is within 25% of both medians. On the 3x3 emulated cluster (9 ranks on 2
    /// cores) the latest 64 of 200 16 KiB calls read 44% below all 200 in one job of 30 (239
    /// against 427 us).
    pub fn moved(&self, all_median_s: f64) -> Option<f64> {
        if self.calls < MOVED_MIN_CALLS || !(all_median_s > 0.0 && self.measured_median_s > 0.0) {
            return None;
        }
        let ratio = self.measured_median_s / all_median_s;
        (!(1.0 / (1.0 + GOAL)..=1.0 + GOAL).contains(&ratio)).then_some(ratio - 1.0)
    }
}

/// Two medians further apart than this factor have no prediction within 25% of both: one
/// within 25% of each lies between 0.75 and 1.25 times it, and 1.25 / 0.75 = 5/3.
pub const APART_FACTOR: f64 = (1.0 + GOAL) / (1.0 - GOAL);

/// What a prediction is held to (issue 23): its median within 25% of the measured median.
pub const GOAL: f64 = 0.25;

/// The factor between two medians, at least 1 (`drift`: one over the other, minus 1).
pub fn drift_factor(drift: f64) -> f64 {
    let r = 1.0 + drift;
    if r >= 1.0 {
        r
    } else {
        1.0 / r
    }
}

/// One call site on one communicator, merged over ranks.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SiteReport {
    /// `file:line` for Rust callers, `symbol+offset (module)` or `module+offset` for C callers.
    pub site: String,
    /// Broadcasts made from this site (per rank; the same on every rank calling from here).
    pub calls: u64,
    /// Bytes broadcast from this site (per rank: sum of message sizes).
    pub bytes: u64,
    /// Number of ranks that called from this site, and their calls summed.
    pub ranks: u32,
    pub rank_calls: u64,
    /// Calls that returned an error, summed over ranks.
    pub failures: u64,
    /// Of `calls`, those the MPI library's `MPI_Bcast` performed instead of treecast (the
    /// `LD_PRELOAD` interposer with `TREECAST_INTERCEPT=0`).
    #[serde(default)]
    pub mpi_bcast_calls: u64,
    /// Per-rank call durations, all ranks merged: of the timed calls only (every call is
    /// counted, but a profiled rank times an adaptive sample of short calls unless
    /// `TREECAST_PROFILE_TIMING=all`; see `profile::tally`).
    pub time: TimeStats,
    /// Calls whose duration was measured, summed over ranks (at most `rank_calls`).
    #[serde(default)]
    pub timed_calls: u64,
    /// Histogram of those durations: (lower edge s, upper edge s, count).
    pub histogram: Vec<(f64, f64, u64)>,
    /// Calls per root.
    pub roots: Vec<(u32, u64)>,
    /// Prediction for the site's dominant size class (most calls; the larger class on ties):
    /// the same as that class's entry in `size_classes`. Compare it with that class's measured
    /// times, not with `time`, which merges every size the site broadcast.
    pub predicted: Option<Predicted>,
    /// Message size, root and size class `predicted` is for (absent in profiles written before
    /// per-class predictions existed, whose prediction was for the last call).
    #[serde(default)]
    pub predicted_bytes: Option<u64>,
    #[serde(default)]
    pub predicted_root: Option<u32>,
    #[serde(default)]
    pub predicted_class: Option<u8>,
    /// `prediction_error` of that class (see [`SizeClassReport::prediction_error`]).
    #[serde(default)]
    pub prediction_error: Option<f64>,
    /// Calls, times and predictions per message-size class, smallest class first.
    #[serde(default)]
    pub size_classes: Vec<SizeClassReport>,
    pub compare: Option<Compare>,
    pub sample_call: Option<SampleCall>,
    /// Arrival skew against transfer over the calls every rank timed (see `profile::arrival`).
    #[serde(default)]
    pub arrival: Option<ArrivalReport>,
    /// The slowest of those calls (first entry to last completion), per rank.
    #[serde(default)]
    pub slowest_call: Option<SampleCall>,
}

/// Where a site's time goes: waiting for the last rank to arrive, or the broadcast itself.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ArrivalReport {
    /// Calls every rank timed, which the figures are over.
    pub calls: u64,
    /// Median of the last rank's entry minus the first rank's entry (seconds).
    pub skew_median_s: f64,
    /// Median of the last completion minus the last entry (seconds).
    pub transfer_median_s: f64,
    /// The rank that entered last most often, and in which share of the calls.
    pub last_rank: u32,
    pub last_rank_share: f64,
    /// One line: what would help.
    pub verdict: String,
}

impl SiteReport {
    /// The entry of `size_classes` that `predicted` is for.
    pub fn predicted_size_class(&self) -> Option<&SizeClassReport> {
        let c = self.predicted_class?;
        self.size_classes.iter().find(|s| s.class == c)
    }
}

/// Smallest and largest message size (bytes) of size class `class` (`plan::size_class`).
pub fn class_bytes(class: u8) -> (u64, u64) {
    match class {
        0 => (0, 0),
        c if c >= 64 => (1u64 << 63, u64::MAX),
        c => (1u64 << (c - 1), (1u64 << c) - 1),
    }
}

/// Why a profile file could not be loaded: the file and what went wrong with it.
/// [`Display`](std::fmt::Display) gives the line `treecast report` prints.
#[derive(Debug)]
pub struct LoadError {
    pub path: std::path::PathBuf,
    pub why: LoadFault,
}

/// What went wrong loading a profile file.
#[derive(Debug)]
pub enum LoadFault {
    /// The file could not be read.
    Read(std::io::Error),
    /// The text is not a profile (the JSON error carries the line).
    Parse(serde_json::Error),
    /// A profile of another format version.
    Version(u32),
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let path = self.path.display();
        match &self.why {
            LoadFault::Read(e) => write!(f, "{path}: {e}"),
            LoadFault::Parse(e) => write!(f, "{path}:{}: not a treecast profile: {e}", e.line()),
            LoadFault::Version(v) => {
                write!(
                    f,
                    "{path}: profile version {v} is not supported (expected {PROFILE_VERSION})"
                )
            }
        }
    }
}

impl std::error::Error for LoadError {}

impl ProfileReport {
    /// Read a profile file, with an error naming the file.
    pub fn load(path: &std::path::Path) -> Result<ProfileReport, LoadError> {
        let fail = |why| LoadError {
            path: path.to_path_buf(),
            why,
        };
        let text = std::fs::read_to_string(path).map_err(|e| fail(LoadFault::Read(e)))?;
        let r: ProfileReport = serde_json::from_str(&text).map_err(|e| fail(LoadFault::Parse(e)))?;
        if r.version != PROFILE_VERSION {
            return Err(fail(LoadFault::Version(r.version)));
        }
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_change_is_a_size_run_more_than_a_factor_of_1_25_off_its_set_up_timing() {
        let t = LibraryTimingReport {
            bytes: 65536,
            pass_median_s: vec![17.0e-6, 19.0e-6, f64::NAN],
            ..Default::default()
        };
        // Against the passes' median, 18 us: inside 1/1.25 .. 1.25, nothing.
        assert_eq!(t.host_change(15.0e-6), None);
        assert_eq!(t.host_change(22.0e-6), None);
        let faster = t.host_change(11.7e-6).expect("faster");
        assert!((faster - 0.65).abs() < 1e-12, "{faster}");
        let slower = t.host_change(36.0e-6).expect("slower");
        assert!((slower - 2.0).abs() < 1e-12, "{slower}");
        // No reading, or no measurement: nothing to say.
        let none = LibraryTimingReport {
            pass_median_s: vec![f64::NAN, 0.0],
            ..t.clone()
        };
        assert_eq!(none.host_change(11.7e-6), None);
        assert_eq!(t.host_change(0.0), None);
    }

    #[test]
    fn a_host_is_shared_from_a_fifth_of_a_cpu_of_another_program_or_the_hypervisor() {
        let l = HostLoadReport {
            hosts: vec!["h000".into(), "h001".into(), "h002".into()],
            ranks: 9,
            cpus: 2,
            window_s: 30.0,
            job_cpus: 1.1,
            other_cpus: 0.03,
            steal_cpus: 0.0,
        };
        assert!(!l.shared());
        assert_eq!(l.hosts_label(), "h000 .. h002");
        assert!(HostLoadReport {
            other_cpus: 0.2,
            ..l.clone()
        }
        .shared());
        assert!(HostLoadReport {
            steal_cpus: 0.25,
            ..l.clone()
        }
        .shared());
        assert!(!HostLoadReport {
            other_cpus: 0.19,
            steal_cpus: 0.19,
            ..l.clone()
        }
        .shared());
        // 16 ranks on 64 CPUs beside a program busy on 8 of the others: not shared.
        let wide = HostLoadReport {
            ranks: 16,
            cpus: 64,
            other_cpus: 8.0,
            ..l.clone()
        };
        assert!(!wide.shared());
        assert!(HostLoadReport {
            other_cpus: 48.5,
            ..wide
        }
        .shared());
        let one = HostLoadReport {
            hosts: vec!["vm".into()],
            ..l
        };
        assert_eq!(one.hosts_label(), "vm");
    }

    /// Reports go from rank to rank in postcard, a format without field names: every field
    /// must be written whether or not it holds a value. (With `skip_serializing_if` on
    /// `given_entries`, a communicator whose classes had none broke the decoding of every
    /// report after it, and a split communicator's report was lost.)
    #[test]
    fn reports_with_absent_values_survive_the_trip_between_ranks() {
        let site = |given: Option<GivenEntries>| SiteReport {
            site: "a.c:1".into(),
            size_classes: vec![SizeClassReport {
                class: 3,
                given_entries: given,
                ..Default::default()
            }],
            ..Default::default()
        };
        let comms = vec![
            CommReport {
                label: "comm 1".into(),
                sites: vec![site(None)],
                clocks: vec![RankClock::default()],
                ..Default::default()
            },
            CommReport {
                label: "MPI_COMM_WORLD".into(),
                sites: vec![site(Some(GivenEntries {
                    calls: 2,
                    measured_median_s: 1e-6,
                    predicted_median_s: 2e-6,
                    error: Some(1.0),
                    worst_rank: Some((1, 1.2)),
                }))],
                clocks: vec![RankClock {
                    offset_at_setup_s: Some(1e-3),
                    drift_ppm: Some(2.0),
                    ..Default::default()
                }],
                ..Default::default()
            },
        ];
        let bytes = postcard::to_stdvec(&comms).unwrap();
        let back: Vec<CommReport> = postcard::from_bytes(&bytes).unwrap();
        assert_eq!(back, comms);
    }
}
