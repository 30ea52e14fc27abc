//! Everything measured so far, per host pair, in the units inference works in.
//!
//! Inference reasons in **one-way distances** (`d = RTT / 2`), so Eq. 1's `/4` becomes `/2`.
//! Each pair keeps its best (smallest) RTT over repeated measurements — queueing, stalls and
//! loaded CPUs only add delay — and an uncertainty `u` (half the robust jitter interval of the
//! measurement that gave the minimum).

use crate::probe::PairMeasurement;
use std::collections::{HashMap, HashSet};

#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Obs {
    /// One-way distance estimate, seconds.
    pub d: f64,
    /// Uncertainty of `d` (half the robust jitter interval), seconds.
    pub u: f64,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct Store {
    obs: HashMap<(usize, usize), Obs>,
    partners: Vec<Vec<usize>>,
    times: HashMap<(usize, usize), u8>,
    bad: HashSet<(usize, usize)>,
    /// All raw measurements, in order (kept for latency fits and reports).
    pub raw: Vec<PairMeasurement>,
    /// Uncertainties of all measurements (for the global noise scale).
    us: Vec<f64>,
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
        let k = key(m.a, m.b);
        let new = Obs {
            d: m.rtt_s() / 2.0,
            u: m.robust_interval_s() / 2.0,
        };
        self.us.push(new.u);
        let t = self.times.entry(k).or_default();
        *t = t.saturating_add(1);
        match self.obs.get_mut(&k) {
            Some(o) => {
                if new.d < o.d {
                    *o = new;
                }
            }
            None => {
                self.obs.insert(k, new);
                self.partners[m.a].push(m.b);
                self.partners[m.b].push(m.a);
            }
        }
        self.raw.push(m);
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
    pub fn pairs(&self) -> impl Iterator<Item = (usize, usize, Obs)> + '_ {
        self.obs.iter().map(|(&(a, b), &o)| (a, b, o))
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
}
