//! Rounds of disjoint pairs: validation and packing.

use super::ProbeError;

/// Check that `pairs` is a valid round over `num_hosts` hosts: indices in range, no self pair,
/// no host in two pairs. The error names the offending host.
pub fn check_round(num_hosts: usize, pairs: &[(usize, usize)]) -> Result<(), ProbeError> {
    let mut used = vec![false; num_hosts];
    for &(a, b) in pairs {
        for h in [a, b] {
            if h >= num_hosts {
                return Err(ProbeError::BadRequest(format!(
                    "round names host {h}, but there are only {num_hosts} hosts"
                )));
            }
        }
        if a == b {
            return Err(ProbeError::BadRequest(format!("round pairs host {a} with itself")));
        }
        for h in [a, b] {
            if std::mem::replace(&mut used[h], true) {
                return Err(ProbeError::BadRequest(format!(
                    "host {h} appears in two pairs of one round (pairs must be disjoint)"
                )));
            }
        }
    }
    Ok(())
}

/// Pack arbitrary pairs into rounds of disjoint pairs, greedily in the given order (first fit).
///
/// Why first fit: the pair lists packed here are small (star verification, bandwidth stages),
/// and first fit needs at most `2 * max_degree - 1` rounds, close to the `max_degree` lower bound
/// in practice.
pub fn matching_rounds(pairs: &[(usize, usize)]) -> Vec<Vec<(usize, usize)>> {
    let mut rounds: Vec<Vec<(usize, usize)>> = Vec::new();
    let mut busy: Vec<std::collections::HashSet<usize>> = Vec::new();
    for &(a, b) in pairs {
        let slot = busy.iter().position(|s| !s.contains(&a) && !s.contains(&b));
        let i = match slot {
            Some(i) => i,
            None => {
                rounds.push(Vec::new());
                busy.push(Default::default());
                rounds.len() - 1
            }
        };
        rounds[i].push((a, b));
        busy[i].insert(a);
        busy[i].insert(b);
    }
    rounds
}

/// All `n (n - 1) / 2` pairs of `n` hosts as `n - 1` (n even) or `n` (n odd) perfect-matching
/// rounds (the circle method). The all-pairs baseline measures with these.
pub fn round_robin_rounds(n: usize) -> Vec<Vec<(usize, usize)>> {
    if n < 2 {
        return Vec::new();
    }
    let m = if n.is_multiple_of(2) { n } else { n + 1 }; // slot m-1 is a bye when n is odd
    let mut rounds = Vec::with_capacity(m - 1);
    for r in 0..m - 1 {
        let mut round = Vec::with_capacity(m / 2);
        for i in 0..m / 2 {
            let a = if i == 0 { m - 1 } else { (r + i) % (m - 1) };
            let b = (r + m - 1 - i) % (m - 1);
            if a < n && b < n {
                round.push((a.min(b), a.max(b)));
            }
        }
        rounds.push(round);
    }
    rounds
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn check_round_rejects_overlap_range_and_self() {
        assert!(check_round(4, &[(0, 1), (2, 3)]).is_ok());
        let e = check_round(4, &[(0, 1), (1, 2)]).unwrap_err().to_string();
        assert!(e.contains("host 1") && e.contains("disjoint"), "{e}");
        assert!(check_round(4, &[(0, 4)]).unwrap_err().to_string().contains("host 4"));
        assert!(check_round(4, &[(2, 2)]).unwrap_err().to_string().contains("itself"));
    }

    #[test]
    fn round_robin_covers_every_pair_once_in_disjoint_rounds() {
        for n in [2usize, 3, 4, 7, 8, 33] {
            let rounds = round_robin_rounds(n);
            assert_eq!(rounds.len(), if n % 2 == 0 { n - 1 } else { n }, "n={n}");
            let mut seen = HashSet::new();
            for r in &rounds {
                check_round(n, r).unwrap();
                for &p in r {
                    assert!(seen.insert(p), "pair {p:?} twice for n={n}");
                }
            }
            assert_eq!(seen.len(), n * (n - 1) / 2);
        }
    }

    #[test]
    fn matching_rounds_are_disjoint_and_complete() {
        let pairs = vec![(0, 1), (0, 2), (0, 3), (1, 2), (4, 5), (3, 4)];
        let rounds = matching_rounds(&pairs);
        // Host 0 is in three pairs: at least three rounds; first fit needs exactly three here.
        assert_eq!(rounds.len(), 3);
        let mut all: Vec<_> = rounds.iter().flatten().copied().collect();
        for r in &rounds {
            check_round(6, r).unwrap();
        }
        all.sort();
        let mut want = pairs.clone();
        want.sort();
        assert_eq!(all, want);
    }
}
