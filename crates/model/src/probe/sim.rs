//! The simulated prober: a known tree, a noise model and a virtual clock.
//!
//! It exercises exactly the code paths of real probing (rounds of disjoint pairs, the ping-pong
//! protocol, bulk transfers) at any scale, deterministically for a seed.
//!
//! **Virtual time of a round** = coordination + measurements, following the
//! MPI prober's [`SetSchedule`]: back to back (the default: distinct machines), one
//! coordination, each pair's sets after one untimed opening round trip, the slowest pair
//! deciding; interleaved (chosen when the noise model has stalls, which stand for hosts emulated
//! on one kernel), every set coordinated and opened on its own, the slowest pair of each set
//! deciding, and a pair that ended far in its first set ([`PingSpec::far_s`]) left out of the
//! later ones. A stall (outlier model) hits one set of one pair when interleaved, the whole
//! window of a pair when back to back.
//!
//! The coordinator is host 0 and coordinates point to point, like the MPI prober: it sends each
//! host of each pair its part of the round (48 bytes; one send after another, each occupying it
//! for its serialisation time), a pair starts once both hosts have it, and its initiator sends
//! the result back (16 bytes plus 8 per sample: all samples are kept); each message costs the
//! one-way path latency plus its size over the path bandwidth in the true tree. A round's
//! coordination time is its span minus its slowest pair's measurement. Hosts in no pair hear
//! nothing. A ping measurement takes the sum of its round trips; a bulk transfer takes the path
//! latency plus `bytes` over its max-min fair share of the bottleneck.

use super::noise::{NoiseModel, NoiseSpec, Outliers};
use super::{
    check_round, ping_pair_opened, PairMeasurement, PingSpec, ProbeError, ProbeLedger, ProbeStats, Prober, SetSchedule,
};
use crate::topology::{Duplex, Topology, VertexId, VertexKind};
use crate::util::rng::Rng;
use std::collections::HashMap;

/// The host vertices of a topology: its `node` vertices when it has any (a rank-level tree:
/// ranks are grouped by the node they hang from, as `MPI_Comm_split_type` groups them), plus any
/// rank hanging directly from a switch; for a host-level tree without nodes, its leaves.
pub fn host_vertices(topo: &Topology) -> Vec<VertexId> {
    let nodes = topo.vertices_of_kind(VertexKind::Node);
    if nodes.is_empty() {
        return topo.leaves();
    }
    let mut out = nodes;
    for r in topo.vertices_of_kind(VertexKind::Rank) {
        let under_node = topo
            .neighbors(r)
            .iter()
            .any(|&(u, _)| topo.vertex(u).kind == VertexKind::Node);
        if !under_node {
            out.push(r);
        }
    }
    out.sort_unstable();
    out
}

/// Max-min fair rates (bytes/s) of concurrent bulk flows `from -> to` on `topo`.
///
/// Full-duplex links carry each direction independently; half-duplex links share one capacity
/// (the a->b bandwidth) between both directions. A flow whose path has only infinite-bandwidth
/// links gets an infinite rate.
pub fn bandwidth_shares(topo: &Topology, flows: &[(VertexId, VertexId)]) -> Vec<f64> {
    // Resource key: (link, direction) for full duplex, (link, true) for half duplex.
    let mut index: HashMap<(usize, bool), usize> = HashMap::new();
    let mut caps: Vec<f64> = Vec::new();
    let users: Vec<(f64, Vec<usize>)> = flows
        .iter()
        .map(|&(a, b)| {
            let res = topo
                .path(a, b)
                .into_iter()
                .map(|d| {
                    let link = topo.link(d.link);
                    let half = link.duplex == Duplex::Half;
                    let key = (d.link, half || d.forward);
                    *index.entry(key).or_insert_with(|| {
                        caps.push(if half {
                            link.ab.bandwidth_bps
                        } else {
                            link.dir(d.forward).bandwidth_bps
                        });
                        caps.len() - 1
                    })
                })
                .collect();
            (f64::INFINITY, res)
        })
        .collect();
    crate::sim::maxmin::reference(&caps, &users)
}

/// Bytes of one host's part of a round (kind, protocol, its pair), as the MPI prober sends it.
const ROUND_MSG_BYTES: f64 = 48.0;

/// A prober over a known tree with simulated noise and a virtual clock.
#[derive(Clone, Debug)]
pub struct SimProber {
    topo: Topology,
    hosts: Vec<VertexId>,
    names: Vec<String>,
    /// Minimum extra one-way delay of each host (0 unless loaded), seconds.
    extra: Vec<f64>,
    jitter: NoiseSpec,
    outliers: Outliers,
    rng: Rng,
    ledger: ProbeLedger,
    schedule: SetSchedule,
    /// The host that coordinates rounds: host 0, or a far-apart part's leader
    /// ([`Prober::run_parts`]).
    coordinator: usize,
}

impl SimProber {
    /// Probe the hosts of `topo` (see [`host_vertices`]) under `noise`, deterministically for `seed`.
    pub fn new(topo: &Topology, noise: NoiseModel, seed: u64) -> Result<SimProber, ProbeError> {
        let hosts = host_vertices(topo);
        if hosts.is_empty() {
            return Err(ProbeError::BadRequest("topology has no hosts to probe".into()));
        }
        let n = hosts.len();
        let names: Vec<String> = hosts.iter().map(|&v| topo.vertex(v).name.clone()).collect();
        let mut extra = vec![0.0; n];
        for l in &noise.loaded {
            let i = names.iter().position(|s| *s == l.host).ok_or_else(|| {
                ProbeError::BadRequest(format!("loaded host '{}' is not a host of the topology", l.host))
            })?;
            extra[i] = l.extra_s;
        }
        let schedule = if noise.outliers.stall_prob > 0.0 {
            SetSchedule::Interleaved
        } else {
            SetSchedule::BackToBack
        };
        Ok(SimProber {
            topo: topo.clone(),
            hosts,
            names,
            extra,
            jitter: noise.jitter,
            outliers: noise.outliers,
            rng: Rng::new(seed),
            ledger: ProbeLedger::new(n),
            schedule,
            coordinator: 0,
        })
    }

    /// Schedule sets as given instead of by the noise model (see [`SetSchedule`]).
    pub fn with_schedule(mut self, schedule: SetSchedule) -> Self {
        self.schedule = schedule;
        self
    }

    /// A stall for one window of one pair, drawn from the outlier model (0 when none).
    fn draw_stall(&mut self) -> f64 {
        if self.outliers.stall_prob > 0.0 && self.rng.f64() < self.outliers.stall_prob {
            let (lo, hi) = self.outliers.stall_s;
            lo + self.rng.f64() * (hi - lo)
        } else {
            0.0
        }
    }

    /// One window of pair `(a, b)` under `spec`: the untimed opening round trip, then the
    /// protocol. Returns the measurement and the window's duration.
    fn window(&mut self, a: usize, b: usize, spec: &PingSpec) -> (PairMeasurement, f64) {
        let stall = self.draw_stall();
        let lat = (self.route(a, b).0, self.route(b, a).0);
        // A round trip given up is waited for until then only (see `protocol`).
        let (m, opening) = ping_pair_opened::<std::convert::Infallible>(a, b, spec, |give_up| {
            Ok(self.round_trip(a, b, lat, stall).min(give_up))
        })
        .unwrap_or_else(|e| match e {});
        let t = opening + m.duration_s();
        (m, t)
    }

    /// The vertex of host `h` in the true tree.
    pub fn host_vertex(&self, h: usize) -> VertexId {
        self.hosts[h]
    }

    /// The true tree.
    pub fn topology(&self) -> &Topology {
        &self.topo
    }

    /// The noise-free RTT between two hosts (seconds).
    pub fn true_rtt(&self, a: usize, b: usize) -> f64 {
        self.route(a, b).0 + self.route(b, a).0
    }

    /// One-way latency (seconds) and path bandwidth (bytes/s) from host `a` to host `b`,
    /// walked up the true tree to their common ancestor and down again. Computed on demand:
    /// inference measures a few percent of the pairs, and the table of every pair that was
    /// built here before cost 0.1-0.2 s at 2,048 hosts (as much as inference itself). The
    /// latencies are added in path order from `a`, so the sum is the one a walk from `a`
    /// gives, bit for bit.
    fn route(&self, a: usize, b: usize) -> (f64, f64) {
        path_route(&self.topo, self.hosts[a], self.hosts[b])
    }

    /// Virtual time of one message of `bytes` from host `from` to host `to` (0 to itself).
    fn message_s(&self, from: usize, to: usize, bytes: f64) -> f64 {
        if from == to {
            return 0.0;
        }
        let (lat, bw) = self.route(from, to);
        lat + if bw.is_finite() { bytes / bw } else { 0.0 }
    }

    /// Virtual time of one window coordinated point to point, as the MPI prober does: the
    /// coordinator (host 0 or a part's leader) sends each host of each pair its part of the round (`msg_bytes`, one
    /// send after another), a pair measures for `busy[i]` once both of its hosts have it, and
    /// its initiator sends `result_bytes[i]` back. Hosts in no pair hear nothing.
    fn window_span(&self, pairs: &[(usize, usize)], busy: &[f64], msg_bytes: f64, result_bytes: &[f64]) -> f64 {
        let c = self.coordinator;
        let serialise = |to: usize| {
            let bw = if to == c { f64::INFINITY } else { self.route(c, to).1 };
            if to == c || !bw.is_finite() {
                0.0
            } else {
                msg_bytes / bw
            }
        };
        let (mut sent, mut end) = (0.0f64, 0.0f64);
        for (i, &(a, b)) in pairs.iter().enumerate() {
            let ra = sent + self.message_s(c, a, msg_bytes);
            sent += serialise(a);
            let rb = sent + self.message_s(c, b, msg_bytes);
            sent += serialise(b);
            end = end.max(ra.max(rb) + busy[i] + self.message_s(a, c, result_bytes[i]));
        }
        end
    }

    /// One simulated round trip between hosts a and b.
    fn round_trip(&mut self, a: usize, b: usize, lat: (f64, f64), stall: f64) -> f64 {
        let one_way = |rng: &mut Rng, from: usize, to: usize| {
            let base = if from == a { lat.0 } else { lat.1 };
            let mut t = base + self.jitter.sample(rng);
            t = t.max(0.0);
            for h in [from, to] {
                if self.extra[h] > 0.0 {
                    t += self.extra[h] * (1.0 - 0.1 * (1.0 - rng.f64()).ln());
                }
            }
            t
        };
        let mut rng = self.rng.clone();
        let mut t = one_way(&mut rng, a, b) + one_way(&mut rng, b, a) + stall;
        if self.outliers.spike_prob > 0.0 && rng.f64() < self.outliers.spike_prob {
            t += rng.f64() * self.outliers.spike_max_s;
        }
        self.rng = rng;
        t
    }
}

/// One-way latency and path bandwidth from vertex `from` to vertex `to` of `topo` (see
/// [`SimProber::route`]): latencies added in path order from `from`.
fn path_route(topo: &Topology, from: VertexId, to: VertexId) -> (f64, f64) {
    topo.path(from, to)
        .into_iter()
        .fold((0.0f64, f64::INFINITY), |(lat, bw), d| {
            let p = topo.dir_params(d);
            (lat + p.latency_s, bw.min(p.bandwidth_bps))
        })
}

impl Prober for SimProber {
    fn num_hosts(&self) -> usize {
        self.hosts.len()
    }

    fn host_name(&self, h: usize) -> &str {
        &self.names[h]
    }

    fn ping_round(&mut self, pairs: &[(usize, usize)], spec: &PingSpec) -> Result<Vec<PairMeasurement>, ProbeError> {
        let n = self.hosts.len();
        check_round(n, pairs)?;
        let mut out: Vec<PairMeasurement> = pairs.iter().map(|&(a, b)| PairMeasurement::empty(a, b)).collect();
        let (windows, spec_per_window) = self.schedule.windows(spec);
        let (mut measure, mut coord) = (0.0f64, 0.0f64);
        for _ in 0..windows {
            let (mut open, mut busy, mut result) = (Vec::new(), Vec::new(), Vec::new());
            for (&(a, b), acc) in pairs.iter().zip(out.iter_mut()) {
                if spec.ended_far(acc) {
                    continue; // a far pair's one round trip is its whole measurement
                }
                let (m, t) = self.window(a, b, &spec_per_window);
                open.push((a, b));
                busy.push(t);
                result.push(16.0 + 8.0 * m.samples_s.len() as f64);
                acc.append(m);
            }
            if open.is_empty() {
                break; // every pair ended far in the first set
            }
            let slowest = busy.iter().copied().fold(0.0, f64::max);
            let span = self.window_span(&open, &busy, ROUND_MSG_BYTES, &result);
            measure += slowest;
            coord += (span - slowest).max(0.0);
        }
        self.ledger.ping_round(pairs, measure, coord);
        Ok(out)
    }

    fn bandwidth_round(&mut self, pairs: &[(usize, usize)], bytes: u64) -> Result<Vec<f64>, ProbeError> {
        let n = self.hosts.len();
        check_round(n, pairs)?;
        let flows: Vec<(VertexId, VertexId)> = pairs.iter().map(|&(a, b)| (self.hosts[a], self.hosts[b])).collect();
        let rates = bandwidth_shares(&self.topo, &flows);
        let mut slowest = 0.0f64;
        for (&(a, b), &r) in pairs.iter().zip(&rates) {
            let t = self.route(a, b).0 + if r.is_finite() { bytes as f64 / r } else { 0.0 };
            slowest = slowest.max(t);
        }
        let busy: Vec<f64> = pairs
            .iter()
            .zip(&rates)
            .map(|(&(a, b), &r)| self.route(a, b).0 + if r.is_finite() { bytes as f64 / r } else { 0.0 })
            .collect();
        let span = self.window_span(pairs, &busy, ROUND_MSG_BYTES, &vec![16.0; pairs.len()]);
        let coord = (span - slowest).max(0.0);
        self.ledger.bandwidth_round(pairs.len(), slowest, coord);
        Ok(rates)
    }

    fn stats(&self) -> &ProbeStats {
        self.ledger.stats()
    }

    /// Each part on a prober of its own: the same network, coordinated by the part's leader,
    /// with its own virtual clock and its own noise draws (seeded from this prober's). A part
    /// costs its job's trip from this coordinator to the leader, its own probing, and its
    /// outcome's trip back; parts run side by side (the slowest decides) unless sets are
    /// interleaved (hosts sharing a kernel), as the MPI prober runs them.
    fn run_parts(
        &mut self,
        leaders: &[usize],
        jobs: &[Vec<u8>],
        work: super::PartWork,
    ) -> Option<Result<Vec<Vec<u8>>, ProbeError>> {
        let mut run = || -> Result<Vec<Vec<u8>>, ProbeError> {
            let n = self.hosts.len();
            let mut outcomes = Vec::with_capacity(jobs.len());
            let mut spans: Vec<(f64, f64, f64)> = Vec::with_capacity(jobs.len());
            for (&leader, job) in leaders.iter().zip(jobs) {
                if leader >= n {
                    return Err(ProbeError::BadRequest(format!("part leader {leader} is not a host")));
                }
                let mut part = SimProber {
                    topo: self.topo.clone(),
                    hosts: self.hosts.clone(),
                    names: self.names.clone(),
                    extra: self.extra.clone(),
                    jitter: self.jitter,
                    outliers: self.outliers,
                    rng: Rng::new(self.rng.next_u64()),
                    ledger: ProbeLedger::new(n),
                    schedule: self.schedule,
                    coordinator: leader,
                };
                let out = work(&mut part, job)?;
                let trips = self.message_s(self.coordinator, leader, job.len() as f64)
                    + self.message_s(leader, self.coordinator, out.len() as f64);
                let s = part.ledger.stats();
                log::debug!(
                    "simulated part led by host {leader}: {} rounds, {:.4} s measuring + {:.4} s coordinating, {:.4} s job and outcome",
                    s.ping_rounds,
                    s.measure_time_s,
                    s.coordination_time_s,
                    trips
                );
                self.ledger.absorb(s, &part.ledger.seen_pairs());
                spans.push((s.measure_time_s, s.coordination_time_s, trips));
                outcomes.push(out);
            }
            if self.schedule == SetSchedule::Interleaved {
                for &(m, c, t) in &spans {
                    self.ledger.add_time(m, c + t);
                }
            } else if let Some(&(m, c, t)) = spans
                .iter()
                .max_by(|x, y| (x.0 + x.1 + x.2).total_cmp(&(y.0 + y.1 + y.2)))
            {
                self.ledger.add_time(m, c + t);
            }
            Ok(outcomes)
        };
        Some(run())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::LoadedHost;
    use crate::topology::TopologyBuilder;

    /// sw0 - {h0, h1}, sw0 - sw1 (5 us, 1 GB/s), sw1 - {h2, h3}; host links 1 us, 10 GB/s.
    fn two_switches() -> Topology {
        let mut b = TopologyBuilder::new();
        let s0 = b.vertex("sw0", VertexKind::Switch);
        let s1 = b.vertex("sw1", VertexKind::Switch);
        b.link(s0, s1, 5e-6, 1e9);
        for i in 0..4 {
            let h = b.vertex(format!("h{i}"), VertexKind::Node);
            b.link(h, if i < 2 { s0 } else { s1 }, 1e-6, 1e10);
        }
        b.build().unwrap()
    }

    #[test]
    fn noise_free_rtts_and_virtual_time() {
        let t = two_switches();
        let mut p = SimProber::new(&t, NoiseModel::default(), 1).unwrap();
        assert_eq!(p.num_hosts(), 4);
        assert_eq!(p.host_name(2), "h2");
        let m = p.ping_round(&[(0, 1)], &PingSpec::default()).unwrap();
        assert!((m[0].rtt_s() - 4e-6).abs() < 1e-15); // 2 x (1 + 1) us
        let first = p.stats().clone();
        let m = p.ping_round(&[(2, 0), (1, 3)], &PingSpec::default()).unwrap();
        assert_eq!((m[0].a, m[0].b, m[1].a, m[1].b), (2, 0, 1, 3));
        assert!((m[0].rtt_s() - 14e-6).abs() < 1e-15); // 2 x (1 + 5 + 1) us
        assert_eq!(m[1].samples_s.len(), 33); // constant RTT: 3 sets of 11
        let mut s = p.stats().clone();
        assert_eq!((s.ping_rounds, s.distinct_pairs), (2, 3));
        // Back to back: one untimed opening round trip + 33 timed ones, the slowest pair.
        assert!((s.measure_time_s - 34.0 * (4e-6 + 14e-6)).abs() < 1e-12);
        assert_eq!(m[0].set_len, vec![11, 11, 11]);
        s.coordination_time_s -= first.coordination_time_s;
        // Coordination, point to point from host 0 (48-byte parts, one send after another):
        // pair (2, 0): host 2 has its part at 7 us + 48 B at 1 GB/s = 7.048 us (0 has its own);
        // host 0's send to 2 occupies it 0.048 us, so host 1 (of pair (1, 3)) has its part at
        // 0.048 + 2 us + 48 B at 10 GB/s = 2.0528 us, and host 3 (whose send follows) at
        // 0.0528 + 7 us + 48 B at 1 GB/s = 7.1008 us. Both pairs measure 34 x 14 us = 476 us; the
        // results (16 + 8 x 33 = 280 B) return 2 -> 0 in 7 us + 0.28 us and 1 -> 0 in
        // 2 us + 0.028 us. Span: max(7.048 + 476 + 7.28, 7.1008 + 476 + 2.028) = 490.328 us,
        // minus the 476 us of measurement: 14.328 us.
        assert!(
            (s.coordination_time_s - 14.328e-6).abs() < 1e-12,
            "{}",
            s.coordination_time_s
        );
        // Interleaved (hosts sharing a kernel): each set is a window of its own, opened by an
        // untimed round trip.
        let mut q = SimProber::new(&t, NoiseModel::default(), 1)
            .unwrap()
            .with_schedule(SetSchedule::Interleaved);
        q.ping_round(&[(2, 0)], &PingSpec::default()).unwrap();
        assert!((q.stats().measure_time_s - 3.0 * 12.0 * 14e-6).abs() < 1e-12);
        // A far pair (first round trip >= far_s) is one round trip after the opening one, and
        // takes no part in the later sets.
        let far = PingSpec {
            far_s: 10e-6,
            ..PingSpec::default()
        };
        let before = q.stats().measure_time_s;
        let m = q.ping_round(&[(2, 0), (1, 3)], &far).unwrap();
        assert_eq!((m[0].set_len.clone(), m[1].set_len.clone()), (vec![1], vec![1]));
        assert!((q.stats().measure_time_s - before - 2.0 * 14e-6).abs() < 1e-12);
        // A near pair in the same spec is measured in full.
        assert_eq!(q.ping_round(&[(0, 1)], &far).unwrap()[0].set_len, vec![11, 11, 11]);
        assert!(p.ping_round(&[(0, 1), (1, 2)], &PingSpec::default()).is_err());
    }

    /// A part's work in the tests below: one ping round of the pair its job names (two bytes),
    /// answering with the pair's first round trip.
    fn one_pair(p: &mut dyn Prober, job: &[u8]) -> Result<Vec<u8>, ProbeError> {
        let m = p.ping_round(&[(job[0] as usize, job[1] as usize)], &PingSpec::default())?;
        Ok(m[0].samples_s[0].to_le_bytes().to_vec())
    }

    #[test]
    fn parts_run_under_their_leaders_side_by_side() {
        let t = two_switches();
        // Alone, pair (3, 2) coordinated from host 0: its parts and result cross the 5 us link.
        let mut alone = SimProber::new(&t, NoiseModel::default(), 1).unwrap();
        alone.ping_round(&[(3, 2)], &PingSpec::default()).unwrap();
        let far_coord = alone.stats().coordination_time_s;
        let mut p = SimProber::new(&t, NoiseModel::default(), 1).unwrap();
        let out = p
            .run_parts(&[0, 2], &[vec![1, 0], vec![3, 2]], one_pair)
            .expect("the simulated prober has coordinators per part")
            .unwrap();
        assert_eq!(out.len(), 2);
        let rtt = |b: &[u8]| f64::from_le_bytes(b.try_into().unwrap());
        assert!((rtt(&out[0]) - 4e-6).abs() < 1e-15 && (rtt(&out[1]) - 4e-6).abs() < 1e-15);
        let s = p.stats();
        assert_eq!((s.ping_rounds, s.ping_measurements, s.distinct_pairs), (2, 2, 2));
        // Side by side: both parts measure 34 x 4 us at once, so the time is one part's, plus
        // the far part's job and outcome crossing 7 us each way; coordination within part 2
        // (leader 2 sends to 3, 3 answers) stays on its switch: 2 x 2 us and the bytes.
        assert!((s.measure_time_s - 34.0 * 4e-6).abs() < 1e-12, "{s:?}");
        assert!(
            s.coordination_time_s > 14e-6 && s.coordination_time_s < 14e-6 + far_coord,
            "{s:?}"
        );
        assert!(s.coordination_time_s - 14e-6 < 0.5 * far_coord, "{s:?} vs {far_coord}");
        // Interleaved (hosts sharing a kernel): parts in turn, their times added.
        let mut q = SimProber::new(&t, NoiseModel::default(), 1)
            .unwrap()
            .with_schedule(SetSchedule::Interleaved);
        q.run_parts(&[0, 2], &[vec![1, 0], vec![3, 2]], one_pair)
            .unwrap()
            .unwrap();
        assert!(
            (q.stats().measure_time_s - 2.0 * 3.0 * 12.0 * 4e-6).abs() < 1e-12,
            "{:?}",
            q.stats()
        );
        // A leader that is not a host is refused.
        let err = p.run_parts(&[9], &[vec![1, 0]], one_pair).unwrap().unwrap_err();
        assert!(err.to_string().contains("leader 9"), "{err}");
    }

    #[test]
    fn rank_level_trees_probe_their_nodes() {
        let mut b = TopologyBuilder::new();
        let s = b.vertex("sw", VertexKind::Switch);
        for n in 0..2u32 {
            let node = b.vertex(format!("n{n}"), VertexKind::Node);
            b.link(node, s, 3e-6, 1e9);
            for k in 0..3 {
                let r = b.rank(n * 3 + k);
                b.link(r, node, 1e-7, 1e10);
            }
        }
        let t = b.build().unwrap();
        let mut p = SimProber::new(&t, NoiseModel::default(), 1).unwrap();
        assert_eq!(p.num_hosts(), 2);
        assert_eq!(p.host_name(1), "n1");
        let m = p.ping_round(&[(1, 0)], &PingSpec::default()).unwrap();
        assert!((m[0].rtt_s() - 12e-6).abs() < 1e-15);
    }

    #[test]
    fn lomax_minimum_is_close_and_loaded_host_is_slow() {
        let t = two_switches();
        let noise = NoiseModel {
            jitter: "lomax:scale_us=2,alpha=1.5".parse().unwrap(),
            loaded: vec![LoadedHost {
                host: "h3".into(),
                extra_s: 10e-6,
            }],
            ..NoiseModel::default()
        };
        let mut p = SimProber::new(&t, noise, 7).unwrap();
        let m = p.ping_round(&[(0, 1), (2, 3)], &PingSpec::default()).unwrap();
        // Jitter only adds; the minimum of >= 33 samples is within a fraction of a microsecond.
        assert!(m[0].rtt_s() >= 4e-6 && m[0].rtt_s() < 5e-6, "{}", m[0].rtt_s());
        // h3 adds at least 10 us to each of the two messages of a round trip.
        assert!(m[1].rtt_s() >= 24e-6 && m[1].rtt_s() < 28e-6, "{}", m[1].rtt_s());
        assert!(m[0].samples_s.iter().all(|&x| x >= 4e-6));
        let bad = NoiseModel {
            loaded: vec![LoadedHost {
                host: "nope".into(),
                extra_s: 1e-6,
            }],
            ..NoiseModel::default()
        };
        assert!(SimProber::new(&t, bad, 1).unwrap_err().to_string().contains("'nope'"));
    }

    #[test]
    fn stalls_inflate_the_whole_window() {
        let t = two_switches();
        let noise = NoiseModel {
            outliers: Outliers::emulated(1.0, 0.0),
            ..NoiseModel::default()
        };
        let mut p = SimProber::new(&t, noise, 7).unwrap();
        let m = p.ping_round(&[(0, 1)], &PingSpec::default()).unwrap();
        assert!(m[0].rtt_s() > 12e-3 && m[0].rtt_s() < 16.1e-3, "{}", m[0].rtt_s());
        // A stalled opening round trip given up (`first_give_up_s`): no sample, and the
        // window lasts until the give-up only.
        let once = PingSpec {
            sets: 1,
            max_round_trips: 1,
            first_give_up_s: 5e-3,
            ..PingSpec::default()
        };
        let before = p.stats().time_s();
        let m = p.ping_round(&[(0, 1)], &once).unwrap();
        assert!(m[0].samples_s.is_empty(), "{:?}", m[0]);
        assert_eq!(m[0].waited_s, 5e-3);
        let spent = p.stats().time_s() - before;
        assert!((5e-3..6e-3).contains(&spent), "{spent}");
    }

    #[test]
    fn same_seed_same_samples() {
        let t = two_switches();
        let noise = NoiseModel::jitter("normal:sd_us=0.5".parse().unwrap());
        let run = |seed| {
            let mut p = SimProber::new(&t, noise.clone(), seed).unwrap();
            p.ping_round(&[(0, 3), (1, 2)], &PingSpec::default()).unwrap()
        };
        assert_eq!(run(5), run(5));
        assert_ne!(run(5), run(6));
    }

    #[test]
    fn concurrent_transfers_share_the_bottleneck() {
        let t = two_switches();
        let mut p = SimProber::new(&t, NoiseModel::default(), 1).unwrap();
        // Both flows cross the 1 GB/s sw0-sw1 link in the same direction: 0.5 GB/s each.
        let r = p.bandwidth_round(&[(0, 2), (1, 3)], 1 << 20).unwrap();
        assert!((r[0] - 5e8).abs() < 1.0 && (r[1] - 5e8).abs() < 1.0, "{r:?}");
        // Opposite directions of a full-duplex link do not interfere.
        let r = p.bandwidth_round(&[(0, 2), (3, 1)], 1 << 20).unwrap();
        assert!((r[0] - 1e9).abs() < 1.0 && (r[1] - 1e9).abs() < 1.0, "{r:?}");
        // Within one switch: the host link (10 GB/s) is the limit.
        let r = p.bandwidth_round(&[(0, 1)], 1 << 20).unwrap();
        assert!((r[0] - 1e10).abs() < 1.0);
        assert_eq!(p.stats().bandwidth_rounds, 3);
        assert!(p.stats().bandwidth_time_s > (1u64 << 20) as f64 / 5e8);
    }
}
