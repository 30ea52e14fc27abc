//! The per-pair RTT protocol of [Shirai2007] §4.1, independent of the transport.
//!
//! Repeated small-message ping-pong keeping the **minimum** (queueing and scheduling only ever add
//! delay, so the minimum is the estimate of the path's own latency); a set stops after
//! `patience` consecutive round trips that do not improve the minimum, or after
//! `max_round_trips`; `sets` independent sets give `sets` minima whose spread (max - min) is the
//! jitter *interval* inference uses to decide whether two branch points coincide.
//!
//! Beyond [Shirai2007]: with a finite `far_s`, a pair whose first round trip takes at least `far_s`
//! (a routed or wide-area path) is measured **coarsely**: that one round trip is the whole
//! measurement, its only set. At 5 ms per round trip the rule of [Shirai2007] spends 0.17-0.45 s on such
//! a pair, while one sample is within microseconds of the minimum — ample for links of
//! milliseconds, though not for microsecond-scale structure. Inference decides what may use
//! coarse pairs (only the join of far-apart parts of the network); the default is the [Shirai2007]
//! protocol (`far_s` infinite).
//!
//! Beyond [Shirai2007], too: a round trip not back within [`PingSpec::give_up_s`] (and
//! [`GIVE_UP_RATIO`] times the pair's lowest so far) is **given up**, and with it the rest of
//! the pair's measurement (its messages wait behind the late one on the same connection). A
//! round lasts as long as its slowest pair, so one stalled message (a lost packet's
//! retransmission timeout, 200 ms on Linux TCP; a heavy-tailed jitter's spike) held every other
//! pair's next round back for all of its duration: 57-236 ms in generated far-apart families
//! whose whole inference takes 0.1 s. What the pair measured before is kept, and the wait is
//! counted ([`PairMeasurement::waited_s`]). A pair's first round trip (and the untimed opening
//! one before it) is given up only after [`PingSpec::first_give_up_s`], infinite by default:
//! there is nothing yet to judge it by. A measurement given up there has no sample.
//!
//! Every sample is kept: the estimate module fits latency distributions to them.

use serde::{Deserialize, Serialize};

/// Parameters of the ping-pong protocol. Defaults are those of [Shirai2007]: 10 / 30 / 3.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct PingSpec {
    /// Stop a set after this many consecutive round trips that do not lower its minimum.
    pub patience: u32,
    /// Stop a set after this many round trips in all.
    pub max_round_trips: u32,
    /// Number of sets (each yields one minimum).
    pub sets: u32,
    /// Payload of each ping and pong, bytes (small: latency, not bandwidth, is measured).
    pub message_bytes: u32,
    /// A pair whose first round trip takes at least this long (seconds) ends there: one set of
    /// one sample. Infinite (the default): never, the protocol of [Shirai2007].
    pub far_s: f64,
    /// A round trip after a pair's first is given up once it has taken this long (seconds) and
    /// `give_up_ratio` times the pair's lowest round trip so far, and the pair's measurement
    /// ends there (see the module doc). Infinite: never.
    #[serde(default = "default_give_up_s")]
    pub give_up_s: f64,
    /// A round trip is given up only beyond this many times the pair's lowest so far, too
    /// (default [`GIVE_UP_RATIO`]; tests lower it to make give-ups happen on a quiet network).
    #[serde(default = "default_give_up_ratio")]
    pub give_up_ratio: f64,
    /// The opening round trip and the first timed one are given up once they have taken this
    /// long (seconds), and the measurement ends without a sample. Infinite (the default):
    /// never, there is nothing yet to judge them by. Inference sets it for every round after
    /// its first, from the longest round trip read so far (see `infer::driver`).
    #[serde(default = "default_first_give_up_s")]
    pub first_give_up_s: f64,
}

/// Default [`PingSpec::give_up_s`]: 10 ms, beyond the scheduling stalls of an oversubscribed
/// host (a time slice is 3-4 ms; hosts emulated on two cores read round trips of a few
/// milliseconds whenever a pair is descheduled, and those must stay samples, or sets would end
/// short there) and 10^2-10^3 times a switched network's round trip, so it ends nothing but
/// true stalls.
pub const GIVE_UP_S: f64 = 10e-3;

/// A round trip is given up only beyond this many times the pair's lowest so far, so that a
/// pair across a wide-area link (round trips of milliseconds, measured in full when inference
/// needs it) is never cut by the fixed [`GIVE_UP_S`].
pub const GIVE_UP_RATIO: f64 = 20.0;

fn default_give_up_s() -> f64 {
    GIVE_UP_S
}

fn default_give_up_ratio() -> f64 {
    GIVE_UP_RATIO
}

fn default_first_give_up_s() -> f64 {
    f64::INFINITY
}

impl Default for PingSpec {
    fn default() -> Self {
        PingSpec {
            patience: 10,
            max_round_trips: 30,
            sets: 3,
            message_bytes: 8,
            far_s: f64::INFINITY,
            give_up_s: GIVE_UP_S,
            give_up_ratio: GIVE_UP_RATIO,
            first_give_up_s: f64::INFINITY,
        }
    }
}

impl PingSpec {
    /// Did `m` (the measurement so far, possibly only its first sets) end as a far pair? Probers
    /// that measure one set at a time skip its remaining sets.
    pub fn ended_far(&self, m: &PairMeasurement) -> bool {
        m.samples_s.first().is_some_and(|&t| t >= self.far_s)
    }

    /// How long the next round trip may take before it is given up, `best` being the pair's
    /// lowest round trip so far (infinite before the first).
    pub fn give_up_after(&self, best: f64) -> f64 {
        if best.is_finite() {
            self.give_up_s.max(self.give_up_ratio * best)
        } else {
            self.first_give_up_s
        }
    }
}

/// The outcome of measuring one pair: every sample, grouped in sets.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PairMeasurement {
    /// The host that initiated the pings.
    pub a: usize,
    /// The host that answered.
    pub b: usize,
    /// Every round-trip time in seconds, in the order measured, sets one after another.
    pub samples_s: Vec<f64>,
    /// Number of samples in each set (sums to `samples_s.len()`).
    pub set_len: Vec<u32>,
    /// Time spent on a round trip given up ([`PingSpec::give_up_s`]): no sample, but the
    /// measurement took it. Zero when none was.
    #[serde(default)]
    pub waited_s: f64,
}

impl PairMeasurement {
    /// A measurement that consists of given set minima only (e.g. from an RTT matrix: one
    /// "sample" per set).
    pub fn from_set_minima(a: usize, b: usize, minima_s: &[f64]) -> Self {
        PairMeasurement {
            a,
            b,
            samples_s: minima_s.to_vec(),
            set_len: vec![1; minima_s.len()],
            waited_s: 0.0,
        }
    }

    /// Nothing measured yet between `a` and `b` (sets are appended with [`append`](Self::append)).
    pub fn empty(a: usize, b: usize) -> Self {
        PairMeasurement {
            a,
            b,
            samples_s: Vec::new(),
            set_len: Vec::new(),
            waited_s: 0.0,
        }
    }

    /// Append the sets of `other` (the same pair measured later: probers measure one set of
    /// every pair at a time and merge them per pair).
    pub fn append(&mut self, other: PairMeasurement) {
        self.samples_s.extend(other.samples_s);
        self.set_len.extend(other.set_len);
        self.waited_s += other.waited_s;
    }

    /// The round trips of each set, in order.
    pub fn sets(&self) -> impl Iterator<Item = &[f64]> + '_ {
        self.set_len.iter().scan(0usize, |start, &n| {
            let set = &self.samples_s[*start..*start + n as usize];
            *start += n as usize;
            Some(set)
        })
    }

    /// The minimum of each set.
    pub fn set_minima_s(&self) -> Vec<f64> {
        self.sets()
            .map(|s| s.iter().copied().fold(f64::INFINITY, f64::min))
            .collect()
    }

    /// The RTT estimate: the smallest sample of all sets (seconds).
    pub fn rtt_s(&self) -> f64 {
        self.samples_s.iter().copied().fold(f64::INFINITY, f64::min)
    }

    /// The jitter interval of [Shirai2007]: max - min of the set minima (seconds).
    pub fn interval_s(&self) -> f64 {
        let m = self.set_minima_s();
        let hi = m.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let lo = m.iter().copied().fold(f64::INFINITY, f64::min);
        if m.is_empty() {
            0.0
        } else {
            hi - lo
        }
    }

    /// Jitter interval ignoring the worst set: the spread of all set minima but the largest.
    ///
    /// Why: one set hit by a scheduling stall (docs/design.md §5.3: a descheduled pair reads
    /// milliseconds instead of microseconds) would otherwise make the interval, and with it the
    /// snapping tolerance, absurdly wide, while the minimum over sets already ignores the stall.
    /// With fewer than three sets this equals [`interval_s`](Self::interval_s).
    pub fn robust_interval_s(&self) -> f64 {
        let mut m = self.set_minima_s();
        if m.len() < 3 {
            return self.interval_s();
        }
        m.sort_by(f64::total_cmp);
        m[m.len() - 2] - m[0]
    }

    /// Was this pair measured coarsely: a single sample (a far pair, see [`PingSpec::far_s`])?
    pub fn is_coarse(&self) -> bool {
        self.samples_s.len() == 1
    }

    /// Time the measurement took: the sum of its round trips, given up ones included (seconds).
    pub fn duration_s(&self) -> f64 {
        self.samples_s.iter().sum::<f64>() + self.waited_s
    }
}

/// The untimed opening round trip of pair `(a, b)` (the first message of a pair may open its
/// connection), then the protocol ([`ping_pair`]) with the same `round_trip`. Returns the
/// measurement and how long the opening took. An opening not back within
/// [`PingSpec::first_give_up_s`] is given up: the measurement has no sample and waited that
/// long, and the opening counts for nothing beyond it. Every prober with an opening (the
/// simulated one and the MPI one) runs this, so the rule is written once.
pub fn ping_pair_opened<E>(
    a: usize,
    b: usize,
    spec: &PingSpec,
    mut round_trip: impl FnMut(f64) -> Result<f64, E>,
) -> Result<(PairMeasurement, f64), E> {
    let opening = round_trip(spec.first_give_up_s)?;
    if opening >= spec.first_give_up_s {
        let m = PairMeasurement {
            a,
            b,
            samples_s: Vec::new(),
            set_len: Vec::new(),
            waited_s: opening,
        };
        return Ok((m, 0.0));
    }
    Ok((ping_pair(a, b, spec, &mut round_trip)?, opening))
}

/// Run the protocol for pair `(a, b)`: `round_trip(give_up)` performs one ping-pong and
/// returns its duration in seconds, or stops waiting once `give_up` seconds have passed and
/// returns that long (the MPI prober times a send/receive of `spec.message_bytes`; the
/// simulated prober draws from its noise model). A round trip of `give_up` or longer is given
/// up and ends the measurement. Errors from the closure abort the measurement.
pub fn ping_pair<E>(
    a: usize,
    b: usize,
    spec: &PingSpec,
    mut round_trip: impl FnMut(f64) -> Result<f64, E>,
) -> Result<PairMeasurement, E> {
    let sets = spec.sets.max(1);
    let max_rt = spec.max_round_trips.max(1);
    let mut samples: Vec<f64> = Vec::with_capacity((sets * max_rt.min(64)) as usize);
    let mut set_len = Vec::with_capacity(sets as usize);
    let mut lowest = f64::INFINITY;
    for _ in 0..sets {
        let mut best = f64::INFINITY;
        let mut since_improvement = 0u32;
        let mut n = 0u32;
        while n < max_rt {
            let give_up = spec.give_up_after(lowest);
            let t = round_trip(give_up)?;
            if t >= give_up {
                if n > 0 {
                    set_len.push(n);
                }
                return Ok(PairMeasurement {
                    a,
                    b,
                    samples_s: samples,
                    set_len,
                    waited_s: t,
                });
            }
            samples.push(t);
            lowest = lowest.min(t);
            n += 1;
            if samples.len() == 1 && t >= spec.far_s {
                return Ok(PairMeasurement {
                    a,
                    b,
                    samples_s: samples,
                    set_len: vec![1],
                    waited_s: 0.0,
                });
            }
            if t < best {
                best = t;
                since_improvement = 0;
            } else {
                since_improvement += 1;
                if since_improvement >= spec.patience {
                    break;
                }
            }
        }
        set_len.push(n);
    }
    Ok(PairMeasurement {
        a,
        b,
        samples_s: samples,
        set_len,
        waited_s: 0.0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(seq: &[f64], spec: &PingSpec) -> PairMeasurement {
        let mut it = seq.iter().copied().cycle();
        ping_pair::<()>(0, 1, spec, |_| Ok(it.next().unwrap())).unwrap()
    }

    #[test]
    fn constant_rtt_stops_after_patience() {
        // First sample sets the minimum, the next 10 do not improve: 11 per set, 33 in all.
        let m = run(&[5e-6], &PingSpec::default());
        assert_eq!(m.set_len, vec![11, 11, 11]);
        assert_eq!(m.samples_s.len(), 33);
        assert_eq!(m.rtt_s(), 5e-6);
        assert_eq!(m.interval_s(), 0.0);
        assert!((m.duration_s() - 33.0 * 5e-6).abs() < 1e-15);
    }

    #[test]
    fn always_improving_stops_at_the_cap() {
        // A strictly decreasing sequence improves every time: each set runs to 30.
        let seq: Vec<f64> = (0..200).map(|i| 1.0 - i as f64 * 1e-3).collect();
        let m = run(&seq, &PingSpec::default());
        assert_eq!(m.set_len, vec![30, 30, 30]);
        // Set minima are the last sample of each set: 0.971, 0.941, 0.911.
        let mins = m.set_minima_s();
        assert!(
            (mins[0] - 0.971).abs() < 1e-12 && (mins[2] - 0.911).abs() < 1e-12,
            "{mins:?}"
        );
        assert!((m.interval_s() - 0.06).abs() < 1e-12);
        assert!((m.robust_interval_s() - 0.03).abs() < 1e-12);
        assert!((m.rtt_s() - 0.911).abs() < 1e-12);
    }

    #[test]
    fn improvement_resets_patience() {
        // 3, then 9 non-improving 4s, then 2 (improves), then 10 non-improving: 21 samples.
        let mut seq = vec![3.0];
        seq.extend(std::iter::repeat_n(4.0, 9));
        seq.push(2.0);
        seq.extend(std::iter::repeat_n(4.0, 10));
        let spec = PingSpec {
            sets: 1,
            ..PingSpec::default()
        };
        let m = run(&seq, &spec);
        assert_eq!(m.set_len, vec![21]);
        assert_eq!(m.rtt_s(), 2.0);
    }

    #[test]
    fn far_pairs_take_one_round_trip() {
        let far = PingSpec {
            far_s: 1e-3,
            ..PingSpec::default()
        };
        // A 5 ms first round trip: that is the whole measurement.
        let m = run(&[5e-3, 4e-3, 6e-3], &far);
        assert_eq!((m.set_len.clone(), m.rtt_s()), (vec![1], 5e-3));
        assert!(m.is_coarse() && far.ended_far(&m));
        // A first round trip below the threshold: the rule of [Shirai2007], whatever follows.
        let m = run(&[0.5e-3, 2e-3, 2e-3], &far);
        assert_eq!(m.set_len.len(), 3);
        assert!(m.set_len.iter().all(|&n| n >= 11), "{:?}", m.set_len);
        assert!(!m.is_coarse() && !far.ended_far(&m));
        // The default ([Shirai2007]) protocol measures far pairs like any other.
        assert_eq!(run(&[5e-3], &PingSpec::default()).set_len, vec![11, 11, 11]);
    }

    #[test]
    fn a_stalled_round_trip_is_given_up_and_ends_the_pair() {
        // Sets of 11 at 20 us; the 15th round trip stalls for 236 ms.
        let mut seq: Vec<f64> = vec![20e-6; 14];
        seq.push(236e-3);
        seq.extend([20e-6; 40]);
        let mut it = seq.iter().copied();
        let mut limits = Vec::new();
        let m = ping_pair::<()>(0, 1, &PingSpec::default(), |give_up| {
            limits.push(give_up);
            Ok(it.next().unwrap().min(give_up))
        })
        .unwrap();
        // The first set is whole, the second keeps its 3 round trips, nothing follows.
        assert_eq!(m.set_len, vec![11, 3]);
        assert_eq!(m.samples_s.len(), 14);
        assert!((m.waited_s - GIVE_UP_S).abs() < 1e-15, "{}", m.waited_s);
        assert!((m.duration_s() - (14.0 * 20e-6 + GIVE_UP_S)).abs() < 1e-12);
        // The first round trip has nothing to be judged by.
        assert!(limits[0].is_infinite());
        assert!(limits[1..].iter().all(|&l| l == GIVE_UP_S));
        // A slow path is judged by its own round trips: 5 ms ones are never given up.
        let m = run(&[5e-3, 12e-3, 5e-3], &PingSpec::default());
        assert_eq!((m.set_len.len(), m.waited_s), (3, 0.0));
        assert_eq!(PingSpec::default().give_up_after(5e-3), GIVE_UP_RATIO * 5e-3);
        // Never giving up is the protocol of [Shirai2007].
        let never = PingSpec {
            give_up_s: f64::INFINITY,
            ..PingSpec::default()
        };
        let m = run(&[20e-6, 236e-3], &never);
        assert_eq!((m.set_len.len(), m.waited_s), (3, 0.0));
        // With a limit for the first round trip, one beyond it ends the measurement empty.
        let first = PingSpec {
            first_give_up_s: 20e-3,
            sets: 1,
            max_round_trips: 1,
            ..PingSpec::default()
        };
        let m = ping_pair::<()>(0, 1, &first, |give_up| Ok(0.68f64.min(give_up))).unwrap();
        assert!(m.samples_s.is_empty() && m.set_len.is_empty());
        assert_eq!((m.waited_s, m.duration_s()), (20e-3, 20e-3));
        let m = ping_pair::<()>(0, 1, &first, |give_up| Ok(4.6e-3f64.min(give_up))).unwrap();
        assert_eq!((m.samples_s.clone(), m.waited_s), (vec![4.6e-3], 0.0));
    }

    #[test]
    fn closure_errors_abort() {
        let mut n = 0;
        let r = ping_pair(0, 1, &PingSpec::default(), |_| {
            n += 1;
            if n == 5 {
                Err("lost peer")
            } else {
                Ok(1.0)
            }
        });
        assert_eq!(r.unwrap_err(), "lost peer");
    }

    #[test]
    fn robust_interval_ignores_one_stalled_set() {
        let m = PairMeasurement::from_set_minima(0, 1, &[20e-6, 13e-3, 21e-6]);
        assert!((m.interval_s() - (13e-3 - 20e-6)).abs() < 1e-12);
        assert!((m.robust_interval_s() - 1e-6).abs() < 1e-12);
        assert_eq!(m.rtt_s(), 20e-6);
    }
}
