//! A measured RTT matrix acting as a prober (`treecast infer --rtt FILE.csv`).
//!
//! Inference asks for pairs exactly as it would on a live job; the matrix answers with its value
//! (three identical set minima: a matrix carries no jitter interval). A pair the matrix lacks is
//! an error naming both hosts, so a user knows which measurement to add.

use super::{check_round, PairMeasurement, PingSpec, ProbeError, ProbeLedger, ProbeStats, Prober};
use crate::topology::rtt_csv::{SYMMETRY_ABS_TOL_US, SYMMETRY_REL_TOL};
use crate::topology::{RttMatrix, TopologyError};

/// Prober answering from an [`RttMatrix`] (microseconds in the file, seconds here).
#[derive(Clone, Debug)]
pub struct MatrixProber {
    source: String,
    hosts: Vec<String>,
    rtt_s: Vec<Vec<Option<f64>>>,
    ledger: ProbeLedger,
}

impl MatrixProber {
    /// Validate `m` (square, zero diagonal, finite, non-negative, symmetric within the CSV
    /// format's tolerance) and wrap it. A pair's RTT is the smaller of its two directions.
    /// `source` names the file in errors.
    pub fn new(m: &RttMatrix, source: &str) -> Result<MatrixProber, TopologyError> {
        let n = m.hosts.len();
        let err = |msg: String| TopologyError::new(msg).in_file(source);
        if n == 0 {
            return Err(err("RTT matrix has no hosts".into()));
        }
        if m.rtt_us.len() != n {
            return Err(err(format!("RTT matrix has {} hosts but {} rows", n, m.rtt_us.len())));
        }
        for (i, row) in m.rtt_us.iter().enumerate() {
            if row.len() != n {
                return Err(err(format!(
                    "row of host '{}' has {} values, expected {n}",
                    m.hosts[i],
                    row.len()
                ))
                .at_line(i + 2));
            }
        }
        for i in 0..n {
            if let Some(d) = m.rtt_us[i][i] {
                if d != 0.0 {
                    return Err(err(format!("RTT of host '{}' to itself is {d}, must be 0", m.hosts[i])).at_line(i + 2));
                }
            }
            for j in 0..n {
                let (hi, hj) = (&m.hosts[i], &m.hosts[j]);
                if let Some(x) = m.rtt_us[i][j] {
                    if !x.is_finite() || x < 0.0 {
                        return Err(err(format!("RTT {hi} -> {hj} is {x}: RTTs must be finite and >= 0"))
                            .at_line(i + 2)
                            .field(hj.clone()));
                    }
                }
                // The two directions are independent min-of-k estimates and may differ by noise,
                // within the tolerance the CSV format defines; more is a broken matrix.
                if let (Some(x), Some(y)) = (m.rtt_us[i][j], m.rtt_us[j][i]) {
                    if (x - y).abs() > (SYMMETRY_REL_TOL * x.max(y)).max(SYMMETRY_ABS_TOL_US) {
                        return Err(err(format!(
                            "RTT matrix is not symmetric: {hi} -> {hj} is {x} but {hj} -> {hi} is {y}"
                        ))
                        .at_line(i + 2)
                        .field(hj.clone()));
                    }
                }
            }
        }
        // Each pair's RTT: the smaller of the directions measured (the minimum statistic).
        let rtt_s: Vec<Vec<Option<f64>>> = (0..n)
            .map(|i| {
                (0..n)
                    .map(|j| match (m.rtt_us[i][j], m.rtt_us[j][i]) {
                        (Some(x), Some(y)) => Some(x.min(y) * 1e-6),
                        (Some(x), None) | (None, Some(x)) => Some(x * 1e-6),
                        (None, None) => None,
                    })
                    .collect()
            })
            .collect();
        Ok(MatrixProber {
            source: source.to_string(),
            hosts: m.hosts.clone(),
            rtt_s,
            ledger: ProbeLedger::new(n),
        })
    }
}

impl Prober for MatrixProber {
    fn num_hosts(&self) -> usize {
        self.hosts.len()
    }

    fn host_name(&self, h: usize) -> &str {
        &self.hosts[h]
    }

    fn ping_round(&mut self, pairs: &[(usize, usize)], spec: &PingSpec) -> Result<Vec<PairMeasurement>, ProbeError> {
        check_round(self.hosts.len(), pairs)?;
        let mut out = Vec::with_capacity(pairs.len());
        for &(a, b) in pairs {
            let v = self.rtt_s[a][b].ok_or_else(|| {
                ProbeError::Missing(format!(
                    "{}: RTT matrix has no value for the pair {} / {}, which inference needs",
                    self.source, self.hosts[a], self.hosts[b]
                ))
            })?;
            out.push(PairMeasurement::from_set_minima(
                a,
                b,
                &vec![v; spec.sets.max(1) as usize],
            ));
        }
        // A matrix costs no probing time: only pairs and rounds are accounted.
        self.ledger.ping_round(pairs, 0.0, 0.0);
        Ok(out)
    }

    fn bandwidth_round(&mut self, _pairs: &[(usize, usize)], _bytes: u64) -> Result<Vec<f64>, ProbeError> {
        Err(ProbeError::Missing(format!(
            "{}: an RTT matrix carries no bandwidth measurements",
            self.source
        )))
    }

    fn stats(&self) -> &ProbeStats {
        self.ledger.stats()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matrix(rows: Vec<Vec<Option<f64>>>) -> RttMatrix {
        RttMatrix {
            hosts: (0..rows.len()).map(|i| format!("h{i}")).collect(),
            rtt_us: rows,
        }
    }

    #[test]
    fn answers_and_names_missing_pairs() {
        let m = matrix(vec![
            vec![Some(0.0), Some(20.0), None],
            vec![Some(20.0), Some(0.0), Some(30.0)],
            vec![None, Some(30.0), Some(0.0)],
        ]);
        let mut p = MatrixProber::new(&m, "m.csv").unwrap();
        let r = p.ping_round(&[(1, 0)], &PingSpec::default()).unwrap();
        assert!((r[0].rtt_s() - 20e-6).abs() < 1e-15);
        assert_eq!(r[0].interval_s(), 0.0);
        let e = p.ping_round(&[(0, 2)], &PingSpec::default()).unwrap_err().to_string();
        assert!(e.contains("m.csv") && e.contains("h0 / h2"), "{e}");
        assert!(p.bandwidth_round(&[(0, 1)], 10).is_err());
    }

    #[test]
    fn rejects_bad_matrices() {
        let close = matrix(vec![vec![Some(0.0), Some(20.0)], vec![Some(21.0), Some(0.0)]]);
        let mut p = MatrixProber::new(&close, "c.csv").unwrap();
        let r = p.ping_round(&[(1, 0)], &PingSpec::default()).unwrap();
        assert!((r[0].rtt_s() - 20e-6).abs() < 1e-15, "the smaller direction");
        let asym = matrix(vec![vec![Some(0.0), Some(20.0)], vec![Some(13000.0), Some(0.0)]]);
        let e = MatrixProber::new(&asym, "a.csv").unwrap_err().to_string();
        assert!(
            e.contains("a.csv") && e.contains("not symmetric") && e.contains("h0 -> h1"),
            "{e}"
        );
        let neg = matrix(vec![vec![Some(0.0), Some(-2.0)], vec![Some(-2.0), Some(0.0)]]);
        assert!(MatrixProber::new(&neg, "n.csv")
            .unwrap_err()
            .to_string()
            .contains(">= 0"));
        let ragged = matrix(vec![vec![Some(0.0), Some(2.0)], vec![Some(2.0)]]);
        let e = MatrixProber::new(&ragged, "r.csv").unwrap_err().to_string();
        assert!(e.contains("row of host 'h1' has 1 values"), "{e}");
        let half = matrix(vec![vec![Some(0.0), None], vec![Some(2.0), Some(0.0)]]);
        let mut p = MatrixProber::new(&half, "h.csv").unwrap();
        assert!(
            p.ping_round(&[(0, 1)], &PingSpec::default()).is_ok(),
            "one direction is enough"
        );
        let diag = matrix(vec![vec![Some(1.0)]]);
        assert!(MatrixProber::new(&diag, "d.csv")
            .unwrap_err()
            .to_string()
            .contains("itself"));
    }
}
