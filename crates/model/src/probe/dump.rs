//! Recorded probe measurements: what a live job measured (`TREECAST_PROBE_DUMP`), and a
//! prober that replays it (`treecast infer --replay`).
//!
//! Why: inference on a real network can only be improved with real data, and a live probe on
//! a shared machine is never the same twice. A dump keeps every round trip of every pair, in
//! order; replaying runs the real protocol ([`ping_pair`]) over each pair's recorded round
//! trips, so a changed protocol (more sets, a different stop rule) or changed inference can be
//! tried on the very measurements that misled the old one. A pair asked for more round trips
//! than were recorded starts over from its first one (counted in [`ReplayProber::reused`]); a
//! pair never measured is an error naming it.

use super::{check_round, ping_pair, PairMeasurement, PingSpec, ProbeError, ProbeLedger, ProbeStats, Prober};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// Version of the dump format.
pub const DUMP_VERSION: u32 = 1;

/// Everything a probe measured: host names and every pair measurement in the order taken, and
/// the settings the job inferred with.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProbeDump {
    pub version: u32,
    pub hosts: Vec<String>,
    pub measurements: Vec<PairMeasurement>,
    /// The job's inference settings; absent from dumps written before they were recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings: Option<RecordedSettings>,
}

/// The settings of a live job's inference that change what the same measurements give, so that
/// a replay infers as the job did.
///
/// Why: a job whose hosts share CPUs contracts links below a resolution floor; a replay that
/// did not know it kept a 0.17 us link the job had contracted (a 4-switch tree at confidence
/// 0.935 where the job had given 3 switches at 0.5), which sends whoever replays a failure
/// after the wrong cause. Infinite values are written as absent (JSON has no infinity).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RecordedSettings {
    /// Shortest switch-to-switch link the job could resolve (seconds; 0: no absolute floor).
    pub resolution_s: f64,
    /// The same as a fraction of the median host link (0: none; absent from dumps written
    /// before the floor became relative, which carry `resolution_s` instead).
    #[serde(default)]
    pub resolution_of_host_link: f64,
    /// Far threshold the job was given (seconds); absent: found in the data, unless
    /// `one_tree`.
    pub far_rtt_s: Option<f64>,
    /// The job measured every pair in full and built one tree (an infinite far threshold).
    #[serde(default)]
    pub one_tree: bool,
    /// Far-apart parts of at least this many hosts were led by their own leader.
    pub led_part_min_hosts: usize,
    /// The protocol's give-up time (seconds); absent: never.
    pub give_up_s: Option<f64>,
    /// The protocol's give-up ratio.
    pub give_up_ratio: f64,
}

impl RecordedSettings {
    /// What makes these settings unusable, if anything.
    fn fault(&self) -> Option<String> {
        let positive = |x: f64| x.is_finite() && x > 0.0;
        if !(self.resolution_s.is_finite() && self.resolution_s >= 0.0) {
            return Some(format!("resolution_s {} is not a length >= 0", self.resolution_s));
        }
        if !(self.resolution_of_host_link.is_finite() && (0.0..1.0).contains(&self.resolution_of_host_link)) {
            return Some(format!(
                "resolution_of_host_link {} is not a fraction in [0, 1)",
                self.resolution_of_host_link
            ));
        }
        if let Some(x) = self.far_rtt_s.filter(|&x| !positive(x)) {
            return Some(format!("far_rtt_s {x} is not a positive round trip"));
        }
        if let Some(x) = self.give_up_s.filter(|&x| !positive(x)) {
            return Some(format!("give_up_s {x} is not a positive time"));
        }
        if !(self.give_up_ratio.is_finite() && self.give_up_ratio >= 1.0) {
            return Some(format!("give_up_ratio {} is not at least 1", self.give_up_ratio));
        }
        None
    }
}

impl ProbeDump {
    pub fn new(hosts: Vec<String>, measurements: Vec<PairMeasurement>, settings: RecordedSettings) -> ProbeDump {
        ProbeDump {
            version: DUMP_VERSION,
            hosts,
            measurements,
            settings: Some(settings),
        }
    }

    /// Parse a dump, checking that every measurement names hosts of the dump. `source` names
    /// the file in errors.
    pub fn from_json(text: &str, source: &str) -> Result<ProbeDump, DumpError> {
        let fail = |why| DumpError {
            source: source.into(),
            why,
        };
        let d: ProbeDump = serde_json::from_str(text).map_err(|e| fail(DumpFault::Parse(e)))?;
        if d.version != DUMP_VERSION {
            return Err(fail(DumpFault::Version(d.version)));
        }
        if let Some(why) = d.settings.as_ref().and_then(RecordedSettings::fault) {
            return Err(fail(DumpFault::Settings(why)));
        }
        let n = d.hosts.len();
        for (i, m) in d.measurements.iter().enumerate() {
            if m.a >= n || m.b >= n || m.a == m.b {
                return Err(fail(DumpFault::NoSuchHost {
                    measurement: i,
                    a: m.a,
                    b: m.b,
                    hosts: n,
                }));
            }
            let total: u64 = m.set_len.iter().map(|&l| l as u64).sum();
            if total != m.samples_s.len() as u64 || m.samples_s.iter().any(|s| !s.is_finite() || *s <= 0.0) {
                return Err(fail(DumpFault::Inconsistent {
                    measurement: i,
                    a: d.hosts[m.a].clone(),
                    b: d.hosts[m.b].clone(),
                }));
            }
        }
        Ok(d)
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a dump serializes")
    }
}

/// Why a probe dump could not be read: the file (as named by the caller) and what is wrong.
/// [`Display`](std::fmt::Display) gives the line `treecast infer` prints.
#[derive(Debug)]
pub struct DumpError {
    pub source: String,
    pub why: DumpFault,
}

/// What is wrong with a probe dump.
#[derive(Debug)]
pub enum DumpFault {
    /// The text is not a dump.
    Parse(serde_json::Error),
    /// A dump of another format version.
    Version(u32),
    /// Measurement `measurement` names a host index the dump lacks, or one host twice.
    NoSuchHost {
        measurement: usize,
        a: usize,
        b: usize,
        hosts: usize,
    },
    /// Measurement `measurement` (between hosts `a` and `b`) has sets that do not add up to its
    /// samples, or a round trip that is not finite and > 0.
    Inconsistent { measurement: usize, a: String, b: String },
    /// The recorded settings are out of range (what is wrong).
    Settings(String),
}

impl std::fmt::Display for DumpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let source = &self.source;
        match &self.why {
            DumpFault::Parse(e) => write!(f, "{source}: not a probe dump: {e}"),
            DumpFault::Version(v) => write!(
                f,
                "{source}: probe dump version {v} (this treecast reads {DUMP_VERSION})"
            ),
            DumpFault::NoSuchHost {
                measurement,
                a,
                b,
                hosts,
            } => write!(
                f,
                "{source}: measurement {measurement} is between hosts {a} and {b}, but the dump has {hosts} hosts"
            ),
            DumpFault::Inconsistent { measurement, a, b } => write!(
                f,
                "{source}: measurement {measurement} ({a} / {b}) has inconsistent sets or non-positive round trips"
            ),
            DumpFault::Settings(why) => write!(f, "{source}: the recorded settings are unusable: {why}"),
        }
    }
}

impl std::error::Error for DumpError {}

/// A prober answering from a [`ProbeDump`].
#[derive(Clone, Debug)]
pub struct ReplayProber {
    hosts: Vec<String>,
    /// Each unordered pair's recorded round trips, in order, and the next one to hand out.
    streams: HashMap<(usize, usize), (Vec<f64>, usize)>,
    reused: u64,
    ledger: ProbeLedger,
}

impl ReplayProber {
    pub fn new(dump: &ProbeDump) -> ReplayProber {
        let mut streams: HashMap<(usize, usize), (Vec<f64>, usize)> = HashMap::new();
        for m in &dump.measurements {
            let k = (m.a.min(m.b), m.a.max(m.b));
            streams.entry(k).or_default().0.extend(&m.samples_s);
        }
        ReplayProber {
            hosts: dump.hosts.clone(),
            streams,
            reused: 0,
            ledger: ProbeLedger::new(dump.hosts.len()),
        }
    }

    /// How many times a pair's recorded round trips ran out and started over.
    pub fn reused(&self) -> u64 {
        self.reused
    }
}

impl Prober for ReplayProber {
    fn num_hosts(&self) -> usize {
        self.hosts.len()
    }

    fn host_name(&self, h: usize) -> &str {
        &self.hosts[h]
    }

    fn ping_round(&mut self, pairs: &[(usize, usize)], spec: &PingSpec) -> Result<Vec<PairMeasurement>, ProbeError> {
        check_round(self.hosts.len(), pairs)?;
        let mut out = Vec::with_capacity(pairs.len());
        let mut slowest = 0.0f64;
        for &(a, b) in pairs {
            let (hosts, reused) = (&self.hosts, &mut self.reused);
            let (samples, next) = self.streams.get_mut(&(a.min(b), a.max(b))).ok_or_else(|| {
                ProbeError::Missing(format!(
                    "the probe dump has no measurement of {} / {}, which inference asks for",
                    hosts[a], hosts[b]
                ))
            })?;
            // Hand out the recorded round trips in order, starting over when they run out.
            // A recorded round trip the protocol gives up on is waited for until then only.
            let m = ping_pair::<ProbeError>(a, b, spec, |give_up| {
                if *next >= samples.len() {
                    *next = 0;
                    *reused += 1;
                }
                let t = samples[*next];
                *next += 1;
                Ok(t.min(give_up))
            })?;
            slowest = slowest.max(m.duration_s());
            out.push(m);
        }
        self.ledger.ping_round(pairs, slowest, 0.0);
        Ok(out)
    }

    fn bandwidth_round(&mut self, pairs: &[(usize, usize)], _bytes: u64) -> Result<Vec<f64>, ProbeError> {
        let (a, b) = pairs.first().copied().unwrap_or((0, 0));
        Err(ProbeError::Missing(format!(
            "a probe dump holds no bandwidth measurements (asked for {} / {}); replay without the bandwidth map",
            self.hosts.get(a).map_or("?", String::as_str),
            self.hosts.get(b).map_or("?", String::as_str)
        )))
    }

    fn stats(&self) -> &ProbeStats {
        self.ledger.stats()
    }
}
