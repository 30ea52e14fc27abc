//! Max-min fair sharing: the reference solver and the heap key the engine's solver uses.
//!
//! Max-min fairness (progressive filling): raise every flow's rate together; when a resource
//! fills up, the flows crossing it freeze at the current level; the others keep rising. The
//! result is the unique allocation in which every flow has a *bottleneck*: a resource that is
//! full and on which no flow gets more than it (or its own rate cap). MFS approximates this by
//! iterating to a 1% threshold (mode N) or stops at the equal split (mode F); we solve it exactly.
//!
//! [`reference()`] is a deliberately simple O(rounds x incidences) implementation with no
//! incremental state. The engine (`flow.rs`) solves only the part of the network an event can
//! change; tests check the two agree.

use std::cmp::Ordering;

/// `f64` ordered by `total_cmp`, for binary heaps of levels.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Level(pub f64);

impl Eq for Level {}
impl PartialOrd for Level {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Level {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// Exact max-min fair rates. `caps[k]` is resource k's capacity; each flow is `(rate cap,
/// resources it crosses)`. Infinite capacities never bind; a flow bound by nothing gets
/// `f64::INFINITY`.
pub fn reference(caps: &[f64], flows: &[(f64, Vec<usize>)]) -> Vec<f64> {
    let mut rate = vec![f64::NAN; flows.len()];
    let mut left: Vec<f64> = caps.to_vec();
    let mut frozen = vec![false; flows.len()];
    loop {
        // Current level = the smallest share any resource or flow cap allows the unfrozen flows.
        let mut counts = vec![0usize; caps.len()];
        let mut any = false;
        for (f, (_, rs)) in flows.iter().enumerate() {
            if !frozen[f] {
                any = true;
                for &r in rs {
                    counts[r] += 1;
                }
            }
        }
        if !any {
            return rate;
        }
        let mut level = f64::INFINITY;
        for (r, &c) in counts.iter().enumerate() {
            if c > 0 {
                level = level.min(left[r].max(0.0) / c as f64);
            }
        }
        for (f, (cap, _)) in flows.iter().enumerate() {
            if !frozen[f] {
                level = level.min(*cap);
            }
        }
        if level.is_infinite() {
            for f in 0..flows.len() {
                if !frozen[f] {
                    rate[f] = f64::INFINITY;
                    frozen[f] = true;
                }
            }
            return rate;
        }
        // Freeze every unfrozen flow that crosses a resource saturated at this level, or whose
        // cap equals it.
        let tol = 1e-12 * level.max(1e-300);
        let saturated: Vec<bool> = (0..caps.len())
            .map(|r| counts[r] > 0 && left[r].max(0.0) / counts[r] as f64 <= level + tol)
            .collect();
        let mut newly = Vec::new();
        for (f, (cap, rs)) in flows.iter().enumerate() {
            if !frozen[f] && (*cap <= level + tol || rs.iter().any(|&r| saturated[r])) {
                newly.push(f);
            }
        }
        for f in newly {
            frozen[f] = true;
            rate[f] = level;
            for &r in &flows[f].1 {
                left[r] -= level;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mfs_example_two_thirds() {
        // Resource 0: unit link shared by flows A and B. Resource 1: B also shares a unit link
        // with two other flows, which holds B to 1/3; A then gets the remaining 2/3.
        let caps = [1.0, 1.0];
        let flows = vec![
            (f64::INFINITY, vec![0]),
            (f64::INFINITY, vec![0, 1]),
            (f64::INFINITY, vec![1]),
            (f64::INFINITY, vec![1]),
        ];
        let r = reference(&caps, &flows);
        assert!((r[1] - 1.0 / 3.0).abs() < 1e-12);
        assert!((r[0] - 2.0 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn caps_and_unbounded() {
        let r = reference(
            &[10.0, f64::INFINITY],
            &[(2.0, vec![0]), (f64::INFINITY, vec![0]), (f64::INFINITY, vec![1])],
        );
        assert_eq!(r, vec![2.0, 8.0, f64::INFINITY]);
    }
}
