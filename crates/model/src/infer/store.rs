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
//!
//! **Hosts sharing a kernel.** Where the hosts are namespaces on one machine, a round trip is
//! the kernel's work, and the machine's speed moves in windows: on a fresh 2-core VM
//! (2026-12-01) whole measurements of 15-30 round trips ran at 0.65-0.8 of the pair's usual
//! time, tightly grouped, while the measurements before and after them did not. That is no
//! queueing a minimum removes: the minimum over a pair's windows is then the one window that
//! ran fast, and a cross-switch pair that got one read as short as a same-switch pair that got
//! none (`three_level_tree` found its tree in 0 of 6 probes, the 3x3 in 6 of 10). There
//! ([`Store::use_median_of_windows`]) two things change:
//! - each measurement's minimum is divided by the machine's *speed* while it ran: the median,
//!   over it and its [`SPEED_WINDOW`] neighbours on each side in the order measured, of each
//!   one's minimum over its pair's usual minimum (fitted in [`SPEED_ROUNDS`] rounds, the
//!   pairs' usual minima from the divided ones). Neighbours are other pairs, so a window that
//!   ran fast for all of them is told from a pair that is short;
//! - a pair's distance is its divided minima's median (each measurement one window of the
//!   interleaved schedule), once it has [`MEDIAN_OF_WINDOWS_FROM`] of them: each window's
//!   minimum still removes the queueing within it, and one fast or slow window in three moves
//!   nothing.
//!
//! Replayed on the 30 probes of the fresh VM's failed CI run (`treecast infer --replay`), the
//! minimum found 20 trees exactly, the median alone 26 (three-level 3 of 6), both 30.

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

/// Measurements of a pair from which [`Store::use_median_of_windows`] takes their minima's
/// median instead of the smallest minimum.
pub(crate) const MEDIAN_OF_WINDOWS_FROM: usize = 3;

/// Neighbours on each side, in the order measured, whose readings set a measurement's speed
/// (see the module documentation). The fast windows seen span about 5-20 measurements; 3, 6
/// and 10 replayed alike.
const SPEED_WINDOW: usize = 6;

/// Rounds of the alternating fit of the pairs' usual minima and the measurements' speeds.
const SPEED_ROUNDS: usize = 3;

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
    /// Under [`Statistic::Min`], a pair's distance is its measurements' minima's median
    /// (hosts sharing a kernel; see the module documentation).
    median_of_windows: bool,
    /// The machine's speed while each raw measurement ran (1 until [`Store::fit_speeds`]).
    speed: Vec<f64>,
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
        self.speed.push(1.0);
        let u = self.observe(self.raw.len() - 1).u;
        self.us.push(u);
        if self.median_of_windows {
            // A new reading moves its neighbours' speeds and its pair's usual minimum.
            self.fit_speeds();
            self.refresh_obs();
        } else {
            let o = self.pair_obs(k);
            self.obs.insert(k, o);
        }
    }

    /// Every pair's observation again (after a change of statistic or of speeds).
    fn refresh_obs(&mut self) {
        let keys: Vec<(usize, usize)> = self.by_pair.keys().copied().collect();
        for k in keys {
            let o = self.pair_obs(k);
            self.obs.insert(k, o);
        }
    }

    /// Fit each measurement's speed (see the module documentation): alternately each pair's
    /// usual minimum (the median of its minima divided by their speeds) and each measurement's
    /// speed (the median over its window of minimum / usual minimum). The whole history is
    /// refitted: where hosts share a kernel there are at most a few hundred measurements.
    fn fit_speeds(&mut self) {
        let mut order: Vec<usize> = self.by_pair.values().flatten().copied().collect();
        order.sort_unstable();
        let mins: Vec<f64> = order.iter().map(|&i| self.raw[i].rtt_s()).collect();
        let keys: Vec<(usize, usize)> = order.iter().map(|&i| key(self.raw[i].a, self.raw[i].b)).collect();
        let mut speed = vec![1.0; order.len()];
        for _ in 0..SPEED_ROUNDS {
            let mut per: FastMap<(usize, usize), Vec<f64>> = FastMap::default();
            for (p, k) in keys.iter().enumerate() {
                per.entry(*k).or_default().push(mins[p] / speed[p]);
            }
            let usual: FastMap<(usize, usize), f64> =
                per.into_iter().map(|(k, mut v)| (k, median_of(&mut v))).collect();
            let ratio: Vec<f64> = (0..order.len())
                .map(|p| mins[p] / usual[&keys[p]])
                .map(|r| if r.is_finite() && r > 0.0 { r } else { 1.0 })
                .collect();
            speed = (0..order.len())
                .map(|p| {
                    let window = &ratio[p.saturating_sub(SPEED_WINDOW)..(p + SPEED_WINDOW + 1).min(order.len())];
                    median_of(&mut window.to_vec())
                })
                .collect();
        }
        for (p, &i) in order.iter().enumerate() {
            self.speed[i] = speed[p];
        }
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
            Statistic::Min if self.median_of_windows => {
                let mut by_min: Vec<(f64, usize)> =
                    ms.iter().map(|&i| (self.raw[i].rtt_s() / self.speed[i], i)).collect();
                by_min.sort_by(|x, y| x.0.total_cmp(&y.0));
                let pick = if by_min.len() >= MEDIAN_OF_WINDOWS_FROM {
                    by_min[by_min.len() / 2].1
                } else {
                    by_min[0].1
                };
                let o = self.observe(pick);
                Obs {
                    d: o.d / self.speed[pick],
                    u: o.u / self.speed[pick],
                }
            }
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

    /// Where the hosts share a kernel (`on`), a pair measured in three windows or more is
    /// placed by its windows' minima's median (see the module documentation); every
    /// observation is recomputed.
    pub fn use_median_of_windows(&mut self, on: bool) {
        if on != self.median_of_windows {
            self.median_of_windows = on;
            if on {
                self.fit_speeds();
            } else {
                self.speed.iter_mut().for_each(|s| *s = 1.0);
            }
            self.refresh_obs();
        }
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
            self.refresh_obs();
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
            if self.median_of_windows && self.stat == Statistic::Min {
                // As `pair_obs` places the pair: divided minima, their median from three on.
                let minima: Vec<f64> = ms
                    .iter()
                    .flat_map(|&i| self.raw[i].set_minima_s().into_iter().map(move |m| m / self.speed[i]))
                    .collect();
                let mut mine: Vec<f64> = if minima.len() < 2 {
                    minima
                } else {
                    minima.into_iter().skip(half).step_by(2).collect()
                };
                let d = if mine.len() >= MEDIAN_OF_WINDOWS_FROM {
                    median_of(&mut mine)
                } else {
                    mine.iter().copied().fold(f64::INFINITY, f64::min)
                } / 2.0;
                if d.is_finite() {
                    out.push((a, b, d));
                }
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

    /// A pair whose one window ran fast (the whole window at 0.65 of its time, as emulated
    /// hosts on one kernel read on 2026-12-01) keeps its usual distance where the hosts share a
    /// kernel, and is placed by that window elsewhere.
    #[test]
    fn a_fast_window_moves_a_pair_only_where_minima_are_kept() {
        let windows = [20e-6, 21e-6, 13e-6, 20.5e-6, 22e-6];
        for shared in [false, true] {
            let mut s = Store::new(2);
            s.use_median_of_windows(shared);
            for (k, &w) in windows.iter().enumerate() {
                s.add(PairMeasurement::from_set_minima(0, 1, &[w]));
                let d = s.get(0, 1).unwrap().d;
                let seen = &windows[..=k];
                let want = if shared && seen.len() >= MEDIAN_OF_WINDOWS_FROM {
                    let mut v = seen.to_vec();
                    v.sort_by(f64::total_cmp);
                    v[v.len() / 2] / 2.0
                } else {
                    seen.iter().copied().fold(f64::INFINITY, f64::min) / 2.0
                };
                assert_eq!(d, want, "shared {shared}, after {} windows", k + 1);
            }
        }
        // Switched on after the fact: the observations are recomputed.
        let mut s = Store::new(2);
        for &w in &windows {
            s.add(PairMeasurement::from_set_minima(0, 1, &[w]));
        }
        assert_eq!(s.get(0, 1).unwrap().d, 6.5e-6);
        s.use_median_of_windows(true);
        assert_eq!(s.get(0, 1).unwrap().d, 10.25e-6);
    }

    /// Four pairs (two 10 us, two 14 us round trips) measured in turn, five windows each; the
    /// machine runs at 0.7 for twelve measurements in a row (three of each pair's five) and
    /// for one lone measurement later. Where the hosts share a kernel, the pairs' distances
    /// keep their true proportions (a speed common to all is no structure: which state is
    /// the usual one, the majority decides) and the lone fast reading is outvoted. A median
    /// without the speeds would do as well only by luck of which windows ran fast; the
    /// smallest minimum mixes the states.
    #[test]
    fn a_window_that_ran_fast_for_every_pair_is_divided_out() {
        let rtt = [10e-6, 14e-6, 10e-6, 14e-6];
        let fast = |j: usize| (4..16).contains(&j) || j == 17;
        let mut s = Store::new(5);
        s.use_median_of_windows(true);
        for j in 0..20 {
            let p = j % 4;
            let speed = if fast(j) { 0.7 } else { 1.0 + 0.01 * (j % 3) as f64 };
            s.add(PairMeasurement::from_set_minima(p, p + 1, &[rtt[p] * speed]));
        }
        let scale = s.get(0, 1).unwrap().d * 2.0 / rtt[0];
        for (p, &want) in rtt.iter().enumerate().skip(1) {
            let r = s.get(p, p + 1).unwrap().d * 2.0 / want / scale;
            assert!((r - 1.0).abs() < 0.03, "pair {p} off the others' proportion by {r}");
        }
        // The stretch's speed against the rest's, from either side of it.
        for j in 4..16 {
            let r = s.speed[j] / s.speed[0];
            assert!(
                (r - 0.7).abs() < 0.03,
                "measurement {j}: speed {} against {}",
                s.speed[j],
                s.speed[0]
            );
        }
        assert!(
            (s.speed[17] / s.speed[19] - 1.0).abs() < 0.03,
            "a lone fast reading is its pair's, not the machine's"
        );
        // The smallest minimum, where the hosts have CPUs of their own, reads every pair in
        // its fast window.
        let mut m = Store::new(5);
        for j in 0..20 {
            let p = j % 4;
            let speed = if fast(j) { 0.7 } else { 1.0 };
            m.add(PairMeasurement::from_set_minima(p, p + 1, &[rtt[p] * speed]));
        }
        assert!((m.get(1, 2).unwrap().d * 2.0 - 0.7 * rtt[1]).abs() < 1e-12);
    }

    /// The halves that replicate a link's evidence place a pair as the whole store does: a
    /// fast window in one half is outvoted there too.
    #[test]
    fn halves_take_the_median_of_windows_too() {
        let windows = [20e-6, 21e-6, 13e-6, 20.5e-6, 20.2e-6, 21.5e-6];
        for shared in [false, true] {
            let mut s = Store::new(2);
            s.use_median_of_windows(shared);
            for &w in &windows {
                s.add(PairMeasurement::from_set_minima(0, 1, &[w]));
            }
            let even = s.half_distances(0)[0].2 * 2.0;
            let odd = s.half_distances(1)[0].2 * 2.0;
            if shared {
                // Windows 0, 2, 4 and 1, 3, 5 (one pair: its speeds are 1).
                assert_eq!((even, odd), (20e-6, 21e-6));
            } else {
                assert_eq!((even, odd), (13e-6, 20.5e-6));
            }
        }
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
