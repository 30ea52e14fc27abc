//! How many round trips each set spends after the warm-up: as many as the precision the tree
//! needs, judged from how the warm-up's own round trips settled.
//!
//! Why: a round of disjoint pairs lasts as long as its slowest pair, and with a few dozen pairs
//! of three sets each, some set always runs to the [Shirai2007] cap of 30 round trips (under
//! skewed jitter the minimum keeps creeping down). Rounds of a 128-host cluster, 60 us apart,
//! took 4-7 ms, almost all of it sets improving their minima by fractions of a microsecond that
//! no decision of the tree depends on. The warm-up, measured under the full protocol, shows
//! what a shorter budget would have cost:
//!
//! - **Minima** (skewed jitter): the share of the warm-up's round trips that come within
//!   [`PRECISION_S`] of distance (twice that of round trip) of their pair's minimum. When sets
//!   of [`SHORT_SET`] would then all miss it at most [`MAX_MISS`] of the time, every set takes
//!   the fewest round trips that keep the miss within [`MAX_MISS`] (at least [`MIN_SET`]);
//!   otherwise the protocol stays as it was. A heavy-tailed or loaded network keeps its 30.
//!   (Judging from each set's loss at its 90th percentile instead jumped between 0 and
//!   0.65 us across parts of one run and cost the stress families exactness.) Why the fewest,
//!   not [`SHORT_SET`] whenever it suffices: with a tenth of round trips near, sets of 15
//!   (ended by the patience rule after 11-15) missed a minimum 1-3% of the time, sets of 10
//!   miss it 4% (9-10% near gives sets of 10-12), and rounds of 128-host parts are a quarter
//!   to a third shorter (2 x 256 hosts under Lomax jitter: 0.127 s mean probe time before,
//!   0.108 s after, 400 trials).
//! - **Medians** (symmetric jitter): a median's precision comes from its sample count, not
//!   from when a minimum stopped moving, so every set takes the same number of round trips:
//!   enough that the standard error of a distance's median, `1.25 sigma / sqrt(n)`, is within
//!   [`PRECISION_S`] (sigma from the warm-up's spread around each pair's median), between
//!   `patience + 1` and the protocol's cap. The patience rule ended sets after 11 to 30 round
//!   trips, so pairs' medians had uneven precision.
//!
//! Only the batch insertion and far-apart parts adapt (both start with a warm-up); the
//! [Shirai2007] comparison modes keep the protocol as given.

use super::store::{median_of, Statistic, Store};
use crate::probe::PingSpec;

/// The precision distances need (seconds): a quarter of the shortest switch link inference is
/// meant to resolve (1 us, the 3-level sweep of `tests/infer.rs`).
pub(crate) const PRECISION_S: f64 = 0.25e-6;

/// Round trips per set when minima settle within it (see the module documentation).
pub(crate) const SHORT_SET: u32 = 15;

/// Fewest round trips a short set takes, however often round trips come near: a set's minimum
/// also feeds the spread of the three sets, which snapping tolerances are made of.
pub(crate) const MIN_SET: u32 = 6;

/// Short sets when their round trips would miss a pair's minimum distance by more than
/// [`PRECISION_S`] at most this often (judged from the share of round trips that come near).
const MAX_MISS: f64 = 0.05;

/// Warm-up sets needed to judge: fewer (jobs of a few hosts) keep the protocol.
const MIN_SETS: usize = 30;

/// The median absolute deviation of a normal sample is 0.6745 sigma.
const MAD_TO_SIGMA: f64 = 1.4826;

/// The standard error of a sample median is about 1.25 sigma / sqrt(n) (normal samples).
const MEDIAN_SE: f64 = 1.2533;

/// The protocol for the rest of a run, from `protocol` (what the user asked for) and what the
/// warm-up measured in `store`, with a line saying why.
pub(crate) fn adapt(protocol: &PingSpec, store: &Store) -> (PingSpec, String) {
    let sets = store.raw.iter().map(|m| m.set_len.len()).sum::<usize>();
    if sets < MIN_SETS || protocol.max_round_trips <= SHORT_SET {
        return (*protocol, format!("{sets} warm-up sets: the protocol as given"));
    }
    match store.statistic() {
        Statistic::Min => {
            let near = near_minimum_share(store, 2.0 * PRECISION_S);
            // A distance is the minimum over all sets: short sets miss it when none of their
            // round trips comes near.
            let miss = (1.0 - near).powi((SHORT_SET * protocol.sets.max(1)) as i32);
            if miss <= MAX_MISS {
                let len = short_set_len(near, protocol.sets.max(1));
                let spec = PingSpec {
                    max_round_trips: len,
                    patience: protocol.patience.min(len),
                    ..*protocol
                };
                let why = format!(
                    "{:.0}% of round trips come within {:.2} us of their pair's minimum distance: sets of {len}",
                    near * 100.0,
                    PRECISION_S * 1e6
                );
                (spec, why)
            } else {
                let why = format!(
                    "only {:.0}% of round trips come within {:.2} us of their pair's minimum distance: sets of up to {}",
                    near * 100.0,
                    PRECISION_S * 1e6,
                    protocol.max_round_trips
                );
                (*protocol, why)
            }
        }
        Statistic::Median => {
            let sigma = distance_sigma(store);
            let need = (MEDIAN_SE * sigma / PRECISION_S).powi(2);
            let per_set = (need / protocol.sets.max(1) as f64).ceil();
            let per_set = per_set.clamp((protocol.patience + 1) as f64, protocol.max_round_trips as f64) as u32;
            let spec = PingSpec {
                patience: per_set,
                max_round_trips: per_set,
                ..*protocol
            };
            let why = format!(
                "a distance's jitter is {:.2} us: {per_set} round trips in every set",
                sigma * 1e6
            );
            (spec, why)
        }
    }
}

/// Round trips per set so that `sets` sets all miss a pair's minimum at most [`MAX_MISS`] of
/// the time, when a share `near` of round trips comes near it: the fewest `n` with
/// `(1 - near)^(sets n) <= MAX_MISS`, within [`MIN_SET`] ..= [`SHORT_SET`].
fn short_set_len(near: f64, sets: u32) -> u32 {
    if near >= 1.0 {
        return MIN_SET;
    }
    let n = (MAX_MISS.ln() / ((1.0 - near).ln() * sets as f64)).ceil();
    if n.is_finite() && n > 0.0 {
        (n as u32).clamp(MIN_SET, SHORT_SET)
    } else {
        SHORT_SET
    }
}

/// The share of all round trips measured that are within `within_s` of their pair's minimum.
fn near_minimum_share(store: &Store, within_s: f64) -> f64 {
    let (mut near, mut all) = (0usize, 0usize);
    for m in &store.raw {
        let min = m.rtt_s();
        near += m.samples_s.iter().filter(|&&x| x - min <= within_s).count();
        all += m.samples_s.len();
    }
    if all == 0 {
        0.0
    } else {
        near as f64 / all as f64
    }
}

/// The jitter (standard deviation) of one distance: the median absolute deviation of every
/// round trip from its pair's median, pooled, as a normal sigma, halved (a distance is half a
/// round trip).
fn distance_sigma(store: &Store) -> f64 {
    let mut dev = Vec::new();
    for m in &store.raw {
        let mut s = m.samples_s.clone();
        let med = median_of(&mut s);
        dev.extend(m.samples_s.iter().map(|x| (x - med).abs()));
    }
    if dev.is_empty() {
        return 0.0;
    }
    MAD_TO_SIGMA * median_of(&mut dev) / 2.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::PairMeasurement;

    /// A store holding `pairs` measurements of three sets, each set given by `set(pair, k)`.
    fn store_of(pairs: usize, set: impl Fn(usize, usize) -> Vec<f64>) -> Store {
        let mut s = Store::new(2 * pairs);
        for p in 0..pairs {
            let mut m = PairMeasurement::empty(2 * p, 2 * p + 1);
            for k in 0..3 {
                let v = set(p, k);
                m.append(PairMeasurement {
                    a: 2 * p,
                    b: 2 * p + 1,
                    set_len: vec![v.len() as u32],
                    waited_s: 0.0,
                    samples_s: v,
                });
            }
            s.add(m);
        }
        s
    }

    #[test]
    fn minima_that_come_near_often_get_short_sets_and_rare_ones_keep_the_cap() {
        let spec = PingSpec::default();
        // A third of the round trips read the pair's minimum (20 us), the rest 3 us more: 45
        // round trips miss it with probability (2/3)^45. Short sets.
        let often = store_of(12, |_, _| {
            (0..30).map(|i| if i % 3 == 0 { 20e-6 } else { 23e-6 }).collect()
        });
        // (2/3)^(3 n) <= 0.05 from n = 3: the floor of MIN_SET, every set as long.
        let (s, why) = adapt(&spec, &often);
        assert_eq!((s.max_round_trips, s.patience), (MIN_SET, MIN_SET), "{why}");
        assert!(why.ends_with("sets of 6"), "{why}");
        // One round trip in ten comes near: 0.9^(3 n) <= 0.05 from n = 10 (0.9^27 = 0.058).
        let tenth = store_of(12, |_, _| {
            (0..30).map(|i| if i % 10 == 3 { 20e-6 } else { 23e-6 }).collect()
        });
        let (s, why) = adapt(&spec, &tenth);
        assert_eq!((s.max_round_trips, s.patience), (10, 10), "{why}");
        // One round trip in 30 comes within 0.5 us of the minimum (18 us; the rest 20 us and
        // more): 45 round trips miss it with probability 0.22. The cap stays.
        let rare = store_of(12, |_, _| {
            (0..30)
                .map(|i| if i == 24 { 18e-6 } else { 20e-6 + i as f64 * 1e-9 })
                .collect()
        });
        let (s, why) = adapt(&spec, &rare);
        assert_eq!(s, spec, "{why}");
        assert!(why.starts_with("only 3%"), "{why}");
        // Too few sets to judge: as given.
        let few = store_of(3, |_, _| vec![20e-6; 30]);
        assert_eq!(adapt(&spec, &few).0, spec);
    }

    #[test]
    fn short_sets_are_the_fewest_that_keep_the_miss_rate() {
        assert_eq!(short_set_len(0.1, 3), 10);
        assert_eq!(short_set_len(0.066, 3), 15);
        assert_eq!(short_set_len(0.5, 3), MIN_SET);
        assert_eq!(short_set_len(1.0, 3), MIN_SET);
        for near in [0.07, 0.1, 0.2, 0.3] {
            let n = short_set_len(near, 3);
            assert!(
                (1.0 - near).powi(3 * n as i32) <= MAX_MISS || n == SHORT_SET,
                "{near}: {n}"
            );
            if n > MIN_SET {
                assert!(
                    (1.0 - near).powi(3 * (n as i32 - 1)) > MAX_MISS,
                    "{near}: {n} is not the fewest"
                );
            }
        }
    }

    #[test]
    fn medians_get_a_fixed_count_from_the_jitter() {
        let spec = PingSpec::default();
        // Round trips spread evenly over the pair's median -4 .. +4 us: their deviations have
        // a median of 2 us, a round trip's sigma 1.4826 * 2 us, a distance's half that;
        // (1.2533 * 1.4826 us / 0.25 us)^2 = 55 round trips, 19 per set of three.
        let spread = |step: f64| {
            move |p: usize, _k: usize| -> Vec<f64> {
                (0..18)
                    .map(|i| 40e-6 + p as f64 * 1e-6 + ((i % 9) as f64 - 4.0) * step)
                    .collect()
            }
        };
        let mut s = store_of(12, spread(1e-6));
        s.set_statistic_for_test(Statistic::Median);
        let (a, why) = adapt(&spec, &s);
        assert_eq!((a.max_round_trips, a.patience), (19, 19), "{why}");
        // Quiet round trips: never fewer than the protocol's patience + 1.
        let mut q = store_of(12, spread(0.0));
        q.set_statistic_for_test(Statistic::Median);
        assert_eq!(adapt(&spec, &q).0.max_round_trips, spec.patience + 1);
        // Loud ones: never more than the protocol's cap.
        let mut l = store_of(12, spread(10e-6));
        l.set_statistic_for_test(Statistic::Median);
        assert_eq!(adapt(&spec, &l).0.max_round_trips, spec.max_round_trips);
    }
}
