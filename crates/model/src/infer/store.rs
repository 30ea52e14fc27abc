//! Everything measured so far, per host pair, in the units inference works in.
//!
//! Inference reasons in **one-way distances** (`d = RTT / 2`), so Eq. 1's `/4` becomes `/2`.
//! Each pair keeps its best (smallest) RTT over repeated measurements — queueing, stalls and
//! loaded CPUs only add delay — and an uncertainty `u` (half the robust jitter interval of the
//! measurement that gave the minimum).
//!
//! **Symmetric jitter.** Where round trips scatter evenly around their typical value (timer
//! noise rather than queueing: the median sits as far above the minimum as the 90th percentile
//! above the median), the minimum is a poor statistic: its bias grows with the number of
//! samples, so pairs measured more read shorter, and its spread is about twice that of the
//! median. [`Store::choose_statistic`] looks at the round trips measured so far and switches
//! to the median of every sample of a pair (pooled over its measurements) when the jitter is
//! symmetric; `u` is then half the spread of the per-set medians.

use crate::probe::PairMeasurement;
use crate::util::fasthash::{FastMap, FastSet};

#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Obs {
    /// One-way distance estimate, seconds.
    pub d: f64,
    /// Uncertainty of `d` (half the robust jitter interval), seconds.
    pub u: f64,
}

/// How a pair's round trips become its distance (see the module documentation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Statistic {
    /// The smallest round trip (queueing and stalls only add delay).
    #[default]
    Min,
    /// The median of all of the pair's round trips (symmetric jitter).
    Median,
}

/// Measurements with at least this many round trips are looked at by
/// [`Store::choose_statistic`].
const SHAPE_MIN_SAMPLES: usize = 10;

/// Measurements needed before [`Store::choose_statistic`] decides anything.
const SHAPE_MIN_MEASUREMENTS: usize = 8;

/// Jitter is symmetric when the median over measurements of (p90 - median) / (median - min) is
/// below this. Normal jitter gives about 0.6 at 10-30 samples; exponential 2.4; the heavy tails
/// of queueing (Lomax) 3 and more.
const SYMMETRIC_RATIO: f64 = 1.2;

#[derive(Clone, Debug, Default)]
pub(crate) struct Store {
    obs: FastMap<(usize, usize), Obs>,
    partners: Vec<Vec<usize>>,
    times: FastMap<(usize, usize), u8>,
    bad: FastSet<(usize, usize)>,
    /// All raw measurements, in order (kept for latency fits and reports).
    pub raw: Vec<PairMeasurement>,
    /// Uncertainties of all measurements (for the global noise scale).
    us: Vec<f64>,
    /// The statistic in use.
    stat: Statistic,
    /// Indices into `raw` of each pair's measurements (fine ones only).
    by_pair: FastMap<(usize, usize), Vec<usize>>,
}

/// The median of `v` (the upper one of an even count; NaN when empty). Reorders `v`.
pub(crate) fn median_of(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let i = v.len() / 2;
    *v.select_nth_unstable_by(i, f64::total_cmp).1
}

/// Half the spread of the per-set medians of `m` (ignoring the widest set when there are three
/// or more, as [`PairMeasurement::robust_interval_s`] does for minima).
fn median_interval(m: &PairMeasurement) -> f64 {
    let mut meds: Vec<f64> = m.sets().map(|s| median_of(&mut s.to_vec())).collect();
    meds.sort_by(f64::total_cmp);
    match meds.len() {
        0 | 1 => 0.0,
        2 => meds[1] - meds[0],
        k => (meds[k - 2] - meds[0]).min(meds[k - 1] - meds[1]),
    }
}

/// (p90 - median) / (median - min) of one measurement's round trips; `None` when too few or
/// when the median equals the minimum.
fn shape_ratio(samples: &[f64]) -> Option<f64> {
    if samples.len() < SHAPE_MIN_SAMPLES {
        return None;
    }
    let mut v = samples.to_vec();
    v.sort_by(f64::total_cmp);
    let q = |f: f64| v[((v.len() - 1) as f64 * f).round() as usize];
    let (lo, med, hi) = (v[0], q(0.5), q(0.9));
    (med > lo).then(|| (hi - med) / (med - lo))
}

fn key(a: usize, b: usize) -> (usize, usize) {
    (a.min(b), a.max(b))
}

impl Store {
    pub fn new(num_hosts: usize) -> Self {
        Store {
            partners: vec![Vec::new(); num_hosts],
            ..Store::default()
        }
    }

    pub fn add(&mut self, m: PairMeasurement) {
        if m.samples_s.is_empty() {
            return; // given up before a round trip came back (`PingSpec::first_give_up_s`)
        }
        let k = key(m.a, m.b);
        let t = self.times.entry(k).or_default();
        *t = t.saturating_add(1);
        if !self.obs.contains_key(&k) {
            self.partners[m.a].push(m.b);
            self.partners[m.b].push(m.a);
        }
        self.by_pair.entry(k).or_default().push(self.raw.len());
        self.raw.push(m);
        let u = self.observe(self.raw.len() - 1).u;
        self.us.push(u);
        let o = self.pair_obs(k);
        self.obs.insert(k, o);
    }

    /// The observation raw measurement `i` gives on its own under the statistic in use.
    fn observe(&self, i: usize) -> Obs {
        let m = &self.raw[i];
        match self.stat {
            Statistic::Min => Obs {
                d: m.rtt_s() / 2.0,
                u: m.robust_interval_s() / 2.0,
            },
            Statistic::Median => Obs {
                d: median_of(&mut m.samples_s.clone()) / 2.0,
                u: median_interval(m) / 2.0,
            },
        }
    }

    /// The one-way distance measurement `m` gives on its own under the statistic in use (a
    /// fresh reading, not pooled with the pair's earlier ones).
    pub fn distance_of(&self, m: &PairMeasurement) -> f64 {
        self.one_way(m.samples_s.iter().copied())
    }

    /// Half the round trip `samples` give under the statistic in use (their minimum or
    /// median; not finite without samples).
    fn one_way(&self, samples: impl Iterator<Item = f64>) -> f64 {
        match self.stat {
            Statistic::Min => samples.fold(f64::INFINITY, f64::min) / 2.0,
            Statistic::Median => median_of(&mut samples.collect::<Vec<f64>>()) / 2.0,
        }
    }

    /// Pair `k`'s observation from all its measurements: that of the measurement with the
    /// smallest minimum (the first on ties), or the median of every round trip of the pair
    /// with its latest measurement's `u`.
    fn pair_obs(&self, k: (usize, usize)) -> Obs {
        let ms = &self.by_pair[&k];
        match self.stat {
            Statistic::Min => ms
                .iter()
                .map(|&i| self.observe(i))
                .reduce(|best, o| if o.d < best.d { o } else { best })
                .expect("a measured pair"),
            Statistic::Median => {
                let mut all: Vec<f64> = ms.iter().flat_map(|&i| self.raw[i].samples_s.iter().copied()).collect();
                Obs {
                    d: median_of(&mut all) / 2.0,
                    u: self.observe(*ms.last().expect("a measured pair")).u,
                }
            }
        }
    }

    /// The statistic in use.
    pub fn statistic(&self) -> Statistic {
        self.stat
    }

    /// Use `stat` whatever the jitter looks like (tests of what depends on the statistic).
    #[cfg(test)]
    pub fn set_statistic_for_test(&mut self, stat: Statistic) {
        self.stat = stat;
    }

    /// Look at the shape of the jitter in everything measured so far and switch to the median
    /// when it is symmetric (see the module documentation); every observation is recomputed.
    /// Returns the median shape ratio when enough was measured to judge.
    pub fn choose_statistic(&mut self) -> Option<f64> {
        let mut ratios: Vec<f64> = self.raw.iter().filter_map(|m| shape_ratio(&m.samples_s)).collect();
        if ratios.len() < SHAPE_MIN_MEASUREMENTS {
            return None;
        }
        let ratio = median_of(&mut ratios);
        let stat = if ratio < SYMMETRIC_RATIO {
            Statistic::Median
        } else {
            Statistic::Min
        };
        if stat != self.stat {
            self.stat = stat;
            self.us = (0..self.raw.len()).map(|i| self.observe(i).u).collect();
            let keys: Vec<(usize, usize)> = self.by_pair.keys().copied().collect();
            for k in keys {
                let o = self.pair_obs(k);
                self.obs.insert(k, o);
            }
        }
        Some(ratio)
    }

    pub fn get(&self, a: usize, b: usize) -> Option<Obs> {
        self.obs.get(&key(a, b)).copied()
    }
    pub fn partners(&self, h: usize) -> &[usize] {
        &self.partners[h]
    }
    /// How many times the pair was measured.
    pub fn times(&self, a: usize, b: usize) -> u8 {
        self.times.get(&key(a, b)).copied().unwrap_or(0)
    }
    /// Mark a pair's measurement as unusable (inconsistent even after re-measuring).
    pub fn mark_bad(&mut self, a: usize, b: usize) {
        self.bad.insert(key(a, b));
    }
    pub fn is_bad(&self, a: usize, b: usize) -> bool {
        self.bad.contains(&key(a, b))
    }
    /// The pairs marked unusable, sorted (smaller host first).
    pub fn bad_pairs(&self) -> Vec<(usize, usize)> {
        let mut v: Vec<(usize, usize)> = self.bad.iter().copied().collect();
        v.sort_unstable();
        v
    }
    pub fn pairs(&self) -> impl Iterator<Item = (usize, usize, Obs)> + '_ {
        self.obs.iter().map(|(&(a, b), &o)| (a, b, o))
    }
    /// Each usable pair's one-way distance from half of its sets only: the even-numbered sets
    /// (`half` 0) or the odd-numbered ones (1), counted over all of the pair's measurements in
    /// the order taken, under the statistic in use. A pair with a single set gives it to both
    /// halves. What [`weigh_decisions`](super::weigh_decisions) replicates a link's evidence on.
    pub fn half_distances(&self, half: usize) -> Vec<(usize, usize, f64)> {
        let mut out = Vec::with_capacity(self.by_pair.len());
        for (&(a, b), ms) in &self.by_pair {
            if self.is_bad(a, b) {
                continue;
            }
            let sets: Vec<&[f64]> = ms.iter().flat_map(|&i| self.raw[i].sets()).collect();
            let mine: Vec<&[f64]> = if sets.len() < 2 {
                sets
            } else {
                sets.into_iter().skip(half).step_by(2).collect()
            };
            let d = self.one_way(mine.iter().flat_map(|s| s.iter().copied()));
            if d.is_finite() {
                out.push((a, b, d));
            }
        }
        out.sort_by_key(|&(a, b, _)| (a, b));
        out
    }

    /// A quantile of the one-way distances of all pairs (0 when nothing was measured).
    pub fn d_quantile(&self, q: f64) -> f64 {
        let mut v: Vec<f64> = self.obs.values().map(|o| o.d).collect();
        if v.is_empty() {
            return 0.0;
        }
        let i = ((v.len() - 1) as f64 * q).round() as usize;
        *v.select_nth_unstable_by(i, f64::total_cmp).1
    }

    /// A quantile of all measurement uncertainties (0 when nothing was measured).
    pub fn u_quantile(&self, q: f64) -> f64 {
        if self.us.is_empty() {
            return 0.0;
        }
        let mut v = self.us.clone();
        let i = ((v.len() - 1) as f64 * q).round() as usize;
        *v.select_nth_unstable_by(i, f64::total_cmp).1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_smaller_rtt() {
        let mut s = Store::new(3);
        s.add(PairMeasurement::from_set_minima(0, 1, &[10e-3, 11e-3, 12e-3]));
        assert_eq!(s.get(1, 0).unwrap().d, 5e-3);
        s.add(PairMeasurement::from_set_minima(1, 0, &[20e-6, 21e-6, 30e-6]));
        let o = s.get(0, 1).unwrap();
        assert_eq!(o.d, 10e-6);
        assert!((o.u - 0.5e-6).abs() < 1e-15);
        s.add(PairMeasurement::from_set_minima(0, 1, &[40e-6, 40e-6, 40e-6]));
        assert_eq!(s.get(0, 1).unwrap().d, 10e-6);
        assert_eq!(s.times(0, 1), 3);
        assert_eq!(s.partners(0), &[1]);
        s.mark_bad(1, 0);
        assert!(s.is_bad(0, 1));
    }

    /// A measurement of `sets` sets of `per_set` round trips of `base + jitter` (seconds).
    fn measured(
        a: usize,
        b: usize,
        base: f64,
        sets: u32,
        per_set: u32,
        jitter: &mut dyn FnMut() -> f64,
    ) -> PairMeasurement {
        PairMeasurement {
            a,
            b,
            samples_s: (0..sets * per_set).map(|_| base + jitter()).collect(),
            set_len: vec![per_set; sets as usize],
            waited_s: 0.0,
        }
    }

    #[test]
    fn symmetric_jitter_switches_to_pooled_medians() {
        let mut rng = crate::util::rng::Rng::new(7);
        let mut normal = || 2.83e-6 * rng.normal();
        let mut s = Store::new(12);
        for a in 0..10 {
            s.add(measured(a, a + 1, 50e-6, 3, 12, &mut normal));
        }
        // Before choosing: minima, biased low by about two standard deviations.
        assert!(s.get(0, 1).unwrap().d < 24.5e-6, "{:?}", s.get(0, 1));
        let ratio = s.choose_statistic().expect("enough measurements to judge");
        assert!(ratio < SYMMETRIC_RATIO, "normal jitter read as skewed: {ratio}");
        assert_eq!(s.statistic(), Statistic::Median);
        for a in 0..10 {
            let d = s.get(a, a + 1).unwrap().d;
            // Median of 36: within 0.3 us (one sd) of the truth; a minimum would be 3 us low.
            assert!((d - 25e-6).abs() < 1.0e-6, "pair {a}: {d}");
        }
        // A second measurement of a pair is pooled with the first, not a new minimum.
        s.add(measured(0, 1, 50e-6, 3, 12, &mut normal));
        assert!((s.get(0, 1).unwrap().d - 25e-6).abs() < 0.8e-6, "{:?}", s.get(0, 1));
        assert_eq!(s.times(0, 1), 2);
    }

    #[test]
    fn skewed_jitter_keeps_minima() {
        let mut rng = crate::util::rng::Rng::new(9);
        // Lomax (scale 2 us, alpha 1.5) on each way: the queueing-like tail of real networks.
        let mut lomax = || {
            let mut one = || 2e-6 * ((1.0 - rng.f64()).powf(-1.0 / 1.5) - 1.0);
            one() + one()
        };
        let mut s = Store::new(12);
        for a in 0..10 {
            s.add(measured(a, a + 1, 50e-6, 3, 12, &mut lomax));
        }
        let ratio = s.choose_statistic().unwrap();
        assert!(ratio >= SYMMETRIC_RATIO, "lomax jitter read as symmetric: {ratio}");
        assert_eq!(s.statistic(), Statistic::Min);
        assert!((s.get(3, 4).unwrap().d - 25e-6).abs() < 0.5e-6);
        // Too little to judge (set minima from a matrix): nothing changes.
        let mut m = Store::new(3);
        m.add(PairMeasurement::from_set_minima(0, 1, &[10e-6, 11e-6, 12e-6]));
        assert_eq!(m.choose_statistic(), None);
        assert_eq!(m.statistic(), Statistic::Min);
    }
}
