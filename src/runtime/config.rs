//! Configuration from `TREECAST_*` environment variables, read once per process.
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `TREECAST_LOG` | log filter for `env_logger` (`info`, `debug`, `treecast=trace`) | `warn` |
//! | `TREECAST_ALGORITHM` | force an algorithm: any name of the registry (`treecast algorithms`: `dfs-chain:segs=8`, `knomial:k=4`, `mpi:scatter-rd`, ...), as reports print them; an unknown name is logged with the valid ones and ignored | `auto` |
//! | `TREECAST_TOPOLOGY` | topology file (JSON or Slurm `topology.conf`) to use instead of probing | unset |
//! | `TREECAST_CACHE` | directory caching inferred topologies, keyed by the sorted host names | unset |
//! | `TREECAST_PROBE` | `0` disables probing (plans then ignore the network) | `1` |
//! | `TREECAST_CALIBRATE` | `0` skips the set-up calibration of predictions (host-mates' ping-pong and send overhead; see `runtime::calibrate`), which then use the topology's link parameters alone | `1` |
//! | `TREECAST_PROBE_PAIRS` | measure at most this many host pairs at once (`1` for hosts emulated on one machine, which share its CPUs); `all`: whole rounds | `all`, or half the CPUs where hosts share a kernel |
//! | `TREECAST_PROBE_SETS` | `back-to-back`: each pair measures its sets in one window; `interleaved`: one window per set over all pairs (protects emulated hosts from scheduling stalls, costs a coordination per set) | `interleaved` where hosts share a kernel, else `back-to-back` |
//! | `TREECAST_PROBE_BANDWIDTH` | bytes per transfer of the bandwidth map built after inference (`0`: no map, plans then see only latency) | `1MiB` |
//! | `TREECAST_FAR_RTT_US` | round trip (us) from which host pairs are far apart (routed or wide-area paths): parts joined only by such paths are inferred each under its own leader and grafted (`infer::parts`); `inf`: no far parts | `auto`: the first gap in the readings |
//! | `TREECAST_PROBE_GIVE_UP_US` | a probe round trip not back after this long (us) and 20 times its pair's fastest is given up, with the rest of that pair's measurement, so one stalled message does not hold a whole round back (`probe::protocol`); `inf`: never | `10000` |
//! | `TREECAST_PROBE_GIVE_UP_RATIO` | testing: the multiple of a pair's fastest round trip below which none is given up, so tests can make give-ups (and their late pongs) happen on a quiet network | `20` |
//! | `TREECAST_PART_LEADERS_FROM` | testing: far-apart parts of at least N hosts are inferred under their own leader (`infer::part_run`), so that path runs under real MPI on a few emulated hosts | `64` |
//! | `TREECAST_PROBE_PARTS` | `side-by-side`: far-apart parts' leaders probe their parts at the same time; `in-turn`: one after another | `side-by-side` where `TREECAST_PROBE_PAIRS` is unlimited, else `in-turn` |
//! | `TREECAST_PROBE_DUMP` | write every probe measurement (host names, each pair's round trips in sets) as JSON to this path, for `treecast infer --replay` and offline study | unset |
//! | `TREECAST_ROUTE` | `auto`: each (root, size class) on the faster of treecast's plan and the MPI library's `MPI_Bcast` (by prediction, else a timed trial); `plan`: always treecast's plan (full error detection); `library`: always the library where it can serve | `auto` |
//! | `TREECAST_SEGMENT` | segment size in bytes for pipelined plans (e.g. `128KiB`) | planner's choice |
//! | `TREECAST_MESSAGE_OVERHEAD_US` | plan with this CPU time per message (us) instead of what the token ring measured at set-up (the profile's route lines say what plans charged): the same plans job after job, however busy the hosts were at set-up; must be the same on every rank. Predictions keep the measured costs | measured |
//! | `TREECAST_TIMEOUT` | seconds without progress after which a broadcast gives up with an error | unset (wait) |
//! | `TREECAST_PROFILE` | write a per-call-site profile (JSON) to this path at `MPI_Finalize` | unset |
//! | `TREECAST_PROFILE_TIMING` | with profiling, `all` times every call; `sample` times an adaptive sample so timing costs at most 0.25% (every call is still counted) | `sample` |
//! | `TREECAST_PROFILE_COMPARE` | with profiling, every Nth call also times `MPI_Bcast` on the same data | unset |
//! | `TREECAST_TAG_UB` | testing: use at most this tag bound (at least 32767, as the MPI standard guarantees), so tests can drive the tag sequence through a wrap in a few hundred calls | `MPI_TAG_UB` |
//! | `TREECAST_VIRTUAL_HOSTS` | testing: pretend every N consecutive ranks form one host named `vhostK` | unset |
//! | `TREECAST_LOCAL_PLAN_ABOVE` | testing: communicators of more than N ranks plan each rank's part alone (`plan::local`), so that path runs under real MPI on a few ranks; must be the same on every rank | `512` |
//! | `TREECAST_INTERCEPT` | interposer (`libtreecast_preload.so`) only: `0` leaves `MPI_Bcast` to the MPI library and only profiles it | `1` |

use std::sync::OnceLock;

/// Most ranks whose predictions are simulated (`plans::Planner::calibrated_times`); above,
/// the contention-free evaluator bounds the cost at finalize (and set-up skips what only the
/// simulator uses, `discovery`'s CPU pools).
pub const SIMULATED_RANKS_MAX: u32 = 512;

/// Parsed configuration.
#[derive(Clone, Debug, Default)]
pub struct Config {
    /// `TREECAST_ALGORITHM`, unless `auto` or unset.
    pub algorithm: Option<crate::plan::Algorithm>,
    pub topology_file: Option<String>,
    pub cache_dir: Option<String>,
    pub probe: bool,
    /// Most host pairs measured concurrently while probing (`None`: a whole round at once).
    pub probe_pairs: Option<usize>,
    /// How sets are scheduled (`None`: by whether hosts share a kernel).
    pub probe_sets: Option<crate::probe::SetSchedule>,
    /// Transfer size of the bandwidth map (`None`: no map).
    pub probe_bandwidth_bytes: Option<u64>,
    /// The far threshold, round trip in seconds (`TREECAST_FAR_RTT_US`; `None`: from the data).
    pub far_rtt_s: Option<f64>,
    /// How long a probe round trip may take before it is given up, seconds
    /// (`TREECAST_PROBE_GIVE_UP_US`; see `PingSpec::give_up_s`).
    pub probe_give_up_s: f64,
    /// Testing knob: `PingSpec::give_up_ratio` (`TREECAST_PROBE_GIVE_UP_RATIO`).
    pub probe_give_up_ratio: f64,
    /// Testing knob: far-apart parts of at least this many hosts are led by their own leader
    /// (`TREECAST_PART_LEADERS_FROM`).
    pub led_part_min_hosts: usize,
    /// Far-apart parts led side by side (`Some(true)`), in turn, or by the pair limit (`None`;
    /// `TREECAST_PROBE_PARTS`).
    pub probe_parts_side_by_side: Option<bool>,
    /// Write the raw probe measurements here (`TREECAST_PROBE_DUMP`).
    pub probe_dump: Option<String>,
    /// How routes are chosen (`TREECAST_ROUTE`).
    pub route: super::route::RoutePolicy,
    pub segment_bytes: Option<u64>,
    /// The per-message overhead plans charge, seconds (`TREECAST_MESSAGE_OVERHEAD_US`; `None`:
    /// measured).
    pub message_overhead_s: Option<f64>,
    pub timeout_s: Option<f64>,
    pub profile_path: Option<String>,
    pub profile_compare: Option<u64>,
    /// Time every profiled call (`TREECAST_PROFILE_TIMING=all`), not a sample.
    pub profile_time_all: bool,
    /// Testing knob: cap on the tag bound (`TREECAST_TAG_UB`).
    pub tag_ub: Option<i32>,
    /// Testing knob: group ranks into virtual hosts of this many consecutive ranks.
    pub virtual_hosts: Option<u32>,
    /// Communicators of more than this many ranks are planned by `plan::local`
    /// (`TREECAST_LOCAL_PLAN_ABOVE`; a testing knob, default
    /// `plan::local::FULL_CHOOSER_MAX_RANKS`).
    pub local_plan_above: usize,
    /// Whether the `LD_PRELOAD` interposer serves `MPI_Bcast` itself (`TREECAST_INTERCEPT`).
    pub intercept: bool,
    /// Measure host-mates' message costs at set-up for predictions (`TREECAST_CALIBRATE`).
    pub calibrate: bool,
}

/// Bandwidth-map transfer size: long enough that a 10 Gbit/s link takes ~1 ms (latency and
/// the acknowledgement then cost a few percent), short enough that a 300 Mbit/s uplink costs
/// ~30 ms per transfer; the map needs only O(depth) rounds.
pub const DEFAULT_PROBE_BANDWIDTH_BYTES: u64 = 1 << 20;

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// Parse a byte size such as `4096`, `64KiB`, `4MiB`, `1GiB`, `16k`, `2M` (see
/// [`crate::util::bytes::parse_size`], which also says what is wrong).
pub fn parse_bytes(s: &str) -> Option<u64> {
    crate::util::bytes::parse_size(s).ok()
}

/// `0`/`false`/`off`/`no` turn a switch off, `1`/`true`/`on`/`yes` on; anything else is
/// reported and leaves it on (the default of every switch read with it).
/// A time given in microseconds (finite, 0 or more), in seconds.
fn parse_microseconds(v: &str) -> Option<f64> {
    v.trim()
        .parse::<f64>()
        .ok()
        .filter(|x| x.is_finite() && *x >= 0.0)
        .map(|x| x * 1e-6)
}

fn parse_switch(name: &str, v: &str) -> bool {
    match v.trim().to_ascii_lowercase().as_str() {
        "0" | "false" | "off" | "no" => false,
        "1" | "true" | "on" | "yes" => true,
        _ => {
            log::warn!("{name}={v:?} is not 0 or 1; using 1");
            true
        }
    }
}

impl Config {
    /// Read the environment. Unparsable values are reported in the log and ignored.
    pub fn from_env() -> Config {
        let parse_f64 = |name: &str| {
            var(name).and_then(|v| match v.parse::<f64>() {
                Ok(x) if x > 0.0 && x.is_finite() => Some(x),
                _ => {
                    log::warn!("{name}={v:?} is not a positive number of seconds; ignored");
                    None
                }
            })
        };
        Config {
            algorithm: var("TREECAST_ALGORITHM").and_then(|v| match v.parse::<crate::plan::Algorithm>() {
                Ok(crate::plan::Algorithm::Auto) => None,
                Ok(a) => Some(a),
                Err(e) => {
                    log::warn!("TREECAST_ALGORITHM={v:?}: {e}; ignored");
                    None
                }
            }),
            topology_file: var("TREECAST_TOPOLOGY"),
            cache_dir: var("TREECAST_CACHE"),
            probe: var("TREECAST_PROBE").map(|v| v != "0").unwrap_or(true),
            calibrate: var("TREECAST_CALIBRATE").is_none_or(|v| parse_switch("TREECAST_CALIBRATE", &v)),
            probe_pairs: var("TREECAST_PROBE_PAIRS").and_then(|v| match v.parse::<usize>() {
                _ if v == "all" => Some(usize::MAX),
                Ok(k) if k > 0 => Some(k),
                _ => {
                    log::warn!("TREECAST_PROBE_PAIRS={v:?} is neither a positive integer nor 'all'; ignored");
                    None
                }
            }),
            far_rtt_s: var("TREECAST_FAR_RTT_US").and_then(|v| match v.parse::<f64>() {
                _ if v == "auto" => None,
                Ok(us) if us > 0.0 => Some(us * 1e-6),
                _ => {
                    log::warn!(
                        "TREECAST_FAR_RTT_US={v:?} is not a positive number of microseconds, 'auto' or 'inf'; ignored"
                    );
                    None
                }
            }),
            probe_give_up_s: var("TREECAST_PROBE_GIVE_UP_US").map_or(crate::probe::GIVE_UP_S, |v| {
                match v.parse::<f64>() {
                    Ok(us) if us > 0.0 => us * 1e-6,
                    _ => {
                        log::warn!(
                            "TREECAST_PROBE_GIVE_UP_US={v:?} is not a positive number of microseconds or 'inf'; using {} us",
                            crate::probe::GIVE_UP_S * 1e6
                        );
                        crate::probe::GIVE_UP_S
                    }
                }
            }),
            probe_give_up_ratio: var("TREECAST_PROBE_GIVE_UP_RATIO").map_or(crate::probe::GIVE_UP_RATIO, |v| {
                match v.parse::<f64>() {
                    Ok(r) if r >= 1.0 => r,
                    _ => {
                        log::warn!(
                            "TREECAST_PROBE_GIVE_UP_RATIO={v:?} is not a number of at least 1; using {}",
                            crate::probe::GIVE_UP_RATIO
                        );
                        crate::probe::GIVE_UP_RATIO
                    }
                }
            }),
            led_part_min_hosts: var("TREECAST_PART_LEADERS_FROM").map_or(crate::infer::LED_PART_MIN_HOSTS, |v| {
                match v.parse::<usize>() {
                    Ok(k) if k > 0 => k,
                    _ => {
                        log::warn!("TREECAST_PART_LEADERS_FROM={v:?} is not a positive integer; ignored");
                        crate::infer::LED_PART_MIN_HOSTS
                    }
                }
            }),
            probe_parts_side_by_side: var("TREECAST_PROBE_PARTS").and_then(|v| match v.as_str() {
                "side-by-side" => Some(true),
                "in-turn" => Some(false),
                _ => {
                    log::warn!("TREECAST_PROBE_PARTS={v:?} is neither 'side-by-side' nor 'in-turn'; ignored");
                    None
                }
            }),
            probe_sets: var("TREECAST_PROBE_SETS").and_then(|v| match v.as_str() {
                "back-to-back" => Some(crate::probe::SetSchedule::BackToBack),
                "interleaved" => Some(crate::probe::SetSchedule::Interleaved),
                _ => {
                    log::warn!("TREECAST_PROBE_SETS={v:?} is neither 'back-to-back' nor 'interleaved'; ignored");
                    None
                }
            }),
            probe_bandwidth_bytes: match var("TREECAST_PROBE_BANDWIDTH") {
                None => Some(DEFAULT_PROBE_BANDWIDTH_BYTES),
                Some(v) => match parse_bytes(&v) {
                    Some(0) => None,
                    Some(b) => Some(b),
                    None => {
                        log::warn!("TREECAST_PROBE_BANDWIDTH={v:?} is not a byte size; using 1MiB");
                        Some(DEFAULT_PROBE_BANDWIDTH_BYTES)
                    }
                },
            },
            probe_dump: var("TREECAST_PROBE_DUMP"),
            route: var("TREECAST_ROUTE")
                .map(|v| {
                    super::route::RoutePolicy::parse(&v).unwrap_or_else(|| {
                        log::warn!("TREECAST_ROUTE={v:?} is not auto, plan or library; using auto");
                        super::route::RoutePolicy::Auto
                    })
                })
                .unwrap_or_default(),
            segment_bytes: var("TREECAST_SEGMENT").and_then(|v| {
                let b = parse_bytes(&v).filter(|&b| b > 0);
                match b {
                    None => log::warn!("TREECAST_SEGMENT={v:?} is not a byte size; ignored"),
                    Some(b) if b < crate::plan::pipeline::MIN_SEGMENT_BYTES => log::warn!(
                        "TREECAST_SEGMENT={v:?} is below {} bytes, the smallest segment plans use; using {} bytes \
                         (and never more than {} segments per message)",
                        crate::plan::pipeline::MIN_SEGMENT_BYTES,
                        crate::plan::pipeline::MIN_SEGMENT_BYTES,
                        crate::plan::pipeline::MAX_SEGMENTS
                    ),
                    Some(_) => {}
                }
                b.map(|b| b.max(crate::plan::pipeline::MIN_SEGMENT_BYTES))
            }),
            message_overhead_s: var("TREECAST_MESSAGE_OVERHEAD_US").and_then(|v| {
                let o = parse_microseconds(&v);
                if o.is_none() {
                    log::warn!(
                        "TREECAST_MESSAGE_OVERHEAD_US={v:?} is not a number of microseconds (0 or more); using the measured overhead"
                    );
                }
                o
            }),
            timeout_s: parse_f64("TREECAST_TIMEOUT"),
            profile_path: var("TREECAST_PROFILE"),
            profile_compare: var("TREECAST_PROFILE_COMPARE").and_then(|v| v.parse().ok().filter(|&n: &u64| n > 0)),
            profile_time_all: match var("TREECAST_PROFILE_TIMING").as_deref().map(str::trim) {
                None | Some("sample") => false,
                Some("all") => true,
                Some(v) => {
                    log::warn!("TREECAST_PROFILE_TIMING={v:?} is neither `all` nor `sample`; sampling");
                    false
                }
            },
            tag_ub: var("TREECAST_TAG_UB").and_then(|v| match v.parse::<i32>() {
                Ok(x) if x >= 32767 => Some(x),
                _ => {
                    log::warn!("TREECAST_TAG_UB={v:?} is not a number of at least 32767; ignored");
                    None
                }
            }),
            virtual_hosts: var("TREECAST_VIRTUAL_HOSTS").and_then(|v| v.parse().ok().filter(|&n: &u32| n > 0)),
            local_plan_above: var("TREECAST_LOCAL_PLAN_ABOVE").map_or(
                crate::plan::local::FULL_CHOOSER_MAX_RANKS,
                |v| {
                    v.parse().unwrap_or_else(|_| {
                        log::warn!("TREECAST_LOCAL_PLAN_ABOVE={v:?} is not a number of ranks; using 512");
                        crate::plan::local::FULL_CHOOSER_MAX_RANKS
                    })
                },
            ),
            intercept: var("TREECAST_INTERCEPT")
                .map(|v| parse_switch("TREECAST_INTERCEPT", &v))
                .unwrap_or(true),
        }
    }
}

/// The process-wide configuration (read on first use; also initializes logging).
pub fn config() -> &'static Config {
    static CONFIG: OnceLock<Config> = OnceLock::new();
    CONFIG.get_or_init(|| {
        init_logging();
        Config::from_env()
    })
}

/// Start `env_logger` from `TREECAST_LOG` unless the application already set a logger.
pub fn init_logging() {
    let _ = env_logger::Builder::from_env(env_logger::Env::default().filter_or("TREECAST_LOG", "warn"))
        .format_timestamp_micros()
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_sizes() {
        assert_eq!(parse_bytes("4096"), Some(4096));
        assert_eq!(parse_bytes("64KiB"), Some(65536));
        assert_eq!(parse_bytes("4MiB"), Some(4 << 20));
        assert_eq!(parse_bytes("2M"), Some(2 << 20));
        assert_eq!(parse_bytes("1GiB"), Some(1 << 30));
        assert_eq!(parse_bytes("12 kb"), Some(12 << 10));
        assert_eq!(parse_bytes("x"), None);
        assert_eq!(parse_bytes("5TiB"), Some(5 << 40));
        assert_eq!(parse_bytes("5XiB"), None);
        assert_eq!(parse_bytes(""), None);
    }

    #[test]
    fn microseconds() {
        let near = |v: &str, want: f64| parse_microseconds(v).is_some_and(|x| (x - want).abs() < 1e-15);
        assert!(near("20", 20e-6));
        assert!(near(" 2.5 ", 2.5e-6));
        assert_eq!(parse_microseconds("0"), Some(0.0));
        for bad in ["", "-1", "abc", "inf", "NaN", "20us"] {
            assert_eq!(parse_microseconds(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn switches() {
        for off in ["0", "false", "OFF", " no "] {
            assert!(!parse_switch("X", off), "{off}");
        }
        for on in ["1", "true", "On", "yes", "maybe"] {
            assert!(parse_switch("X", on), "{on}");
        }
    }
}
