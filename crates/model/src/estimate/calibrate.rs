//! Costs a job measures of itself, turned into model parameters, and the prediction made with
//! them.
//!
//! The topology alone says nothing about what a message between two ranks of one host costs
//! (its links carry shared-memory defaults), nor about the software overhead every message
//! pays. The runtime measures both at set-up (a ping-pong of two sizes between host-mates, a
//! burst of small sends, the token ring between hosts) and this module turns the readings into
//! parameters: [`fit_path_cost`] fits `latency + bytes / bandwidth` to the two ping-pong sizes,
//! [`with_host_links`] writes the fit onto every rank's link to its host, and
//! [`evaluate_calibrated`] evaluates a plan with a per-message overhead charged to every send
//! (the contention-free model of `plan_dag` otherwise), giving every rank's time in the call
//! as well as the completion.
//!
//! Model of one send of `b` bytes issued at `S` on a path of latency `L` and bandwidth `B`,
//! with overhead `o`: the sender is busy until `S + o` (its next send is issued no earlier),
//! the data is at the receiver at `S + o + L + b / B`, and the sender leaves the call no
//! earlier than `S + o + b / B` (its buffer is copied out, eagerly or by the receiver). All
//! ranks enter at 0 unless entry times are given; a rank's time in the call is the later of its
//! data's arrival and the end of its last send.
//!
//! Entry times (`enter`, one per rank, as a profile records them) make the prediction one of a
//! call as it happened: a rank issues nothing before it enters, a message that arrived earlier
//! is taken in `o` after the receiver enters, and a rendezvous message (longer than
//! [`RENDEZVOUS_BYTES`](crate::plan::pipeline::RENDEZVOUS_BYTES)) waits for its receiver. A
//! rank that arrives after its data spends only that `o` in the call, which an all-at-once
//! prediction cannot see: after a barrier on an oversubscribed host, ranks enter microseconds
//! apart and the median rank's time in a 16-64 KiB call is shorter than any transfer.

use super::plan_dag::{send_paths, serialization, PlanDag};
use super::rank_times::checked_entries;
pub use super::rank_times::{median, CalibratedTimes};
use super::EstimateError;
use crate::plan::Plan;
use crate::topology::{LinkDir, Topology, VertexKind};

/// Latency and bandwidth of a path (seconds, bytes per second).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PathCost {
    pub latency_s: f64,
    pub bandwidth_bps: f64,
}

/// What a job measured of itself at set-up, as model parameters.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Calibration {
    /// One-way cost between two ranks of one host (both rank links together), when measured.
    pub host_path: Option<PathCost>,
    /// Software overhead of one message at its sender (seconds).
    pub overhead_s: f64,
    /// Costs of one message between host-mates per message size (predictions on one host).
    pub send_curve: Option<super::send_curve::SendCurve>,
    /// The pair's costs as measured, where `send_curve` was scaled since: what receivers that
    /// share a CPU copy at (`super::send_curve::SharedCpus`). `None`: `send_curve` is them.
    pub pair_curve: Option<super::send_curve::SendCurve>,
    /// The library's broadcast timed at set-up on one host of three ranks or more (two under MPICH), per size
    /// (`runtime::library_fit`; empty elsewhere): what `send_curve` was scaled to.
    pub library_timing: Vec<super::curve_fit::LibraryTiming>,
    /// How far apart the set-up's two passes over the host-mates' curve read its one-way
    /// times (`runtime::calibrate::passes_apart`: the median over 1 KiB .. 2 MiB of the slower
    /// over the faster; `None` where not measured). The curve keeps the lesser of each.
    pub curve_passes_apart: Option<f64>,
}

/// `latency + bytes / bandwidth` through two one-way times `(bytes, seconds)`, the small size
/// first. The latency is what the small message took beyond its own serialization (never
/// negative); a large message no slower than the small one (timer noise, a tiny pair of sizes)
/// gets the bandwidth of its own time alone. `None` for unusable readings (sizes not
/// increasing, times not positive and finite).
pub fn fit_path_cost(small: (u64, f64), large: (u64, f64)) -> Option<PathCost> {
    let ((b1, t1), (b2, t2)) = small_large(small, large)?;
    let slope = (t2 - t1) / (b2 - b1);
    let bandwidth_bps = if slope > 0.0 { 1.0 / slope } else { b2 / t2 };
    let latency_s = (t1 - b1 / bandwidth_bps).clamp(0.0, t1);
    Some(PathCost {
        latency_s,
        bandwidth_bps,
    })
}

fn small_large(small: (u64, f64), large: (u64, f64)) -> Option<((f64, f64), (f64, f64))> {
    let ok = |t: f64| t.is_finite() && t > 0.0;
    (small.0 < large.0 && ok(small.1) && ok(large.1)).then_some(((small.0 as f64, small.1), (large.0 as f64, large.1)))
}

/// Per-message overhead from a burst: `k` sends issued back to back took `seconds` in all.
pub fn overhead_from_burst(k: u32, seconds: f64) -> Option<f64> {
    (k > 0 && seconds.is_finite() && seconds >= 0.0).then(|| seconds / f64::from(k))
}

/// The latency left to the links once the overhead is charged separately: a small message's
/// one-way time is `overhead + latency`, so the path keeps the rest (never negative).
pub fn split_overhead(path: PathCost, overhead_s: f64) -> PathCost {
    PathCost {
        latency_s: (path.latency_s - overhead_s).max(0.0),
        ..path
    }
}

/// `topo` with every link between a rank and its host node set to half the path's latency and
/// its bandwidth, both ways (a path between host-mates crosses two such links). Other links,
/// and a rank link's latency fit, are kept.
pub fn with_host_links(topo: &Topology, path: PathCost) -> Topology {
    let mut b = topo.to_builder();
    let is = |v: usize, k: VertexKind| b.vertices[v].kind == k;
    let host_links: Vec<usize> = (0..b.links.len())
        .filter(|&i| {
            let l = &b.links[i];
            (is(l.a, VertexKind::Rank) && is(l.b, VertexKind::Node))
                || (is(l.b, VertexKind::Rank) && is(l.a, VertexKind::Node))
        })
        .collect();
    let d = LinkDir::new(path.latency_s / 2.0, path.bandwidth_bps);
    for i in host_links {
        b.links[i].ab = d;
        b.links[i].ba = d;
    }
    b.build().expect("changing link parameters keeps a valid tree")
}

/// Evaluate `plan` for `bytes` on `topo` charging `overhead_s` to every send; `enter`: each
/// rank's entry time (see the module docs), `None` for all at 0.
pub fn evaluate_calibrated(
    topo: &Topology,
    plan: &Plan,
    bytes: u64,
    overhead_s: f64,
    enter: Option<&[f64]>,
) -> Result<CalibratedTimes, EstimateError> {
    let dag = PlanDag::build(plan, bytes)?;
    let paths = send_paths(topo, plan, &dag)?;
    let n = plan.nranks as usize;
    let enter = checked_entries(enter, n)?;
    let entered = |r: u32| enter.as_ref().map_or(0.0, |e| e[r as usize]);
    let rendezvous = crate::plan::pipeline::RENDEZVOUS_BYTES;
    let mut start = Vec::with_capacity(dag.sends.len());
    let mut done: Vec<f64> = Vec::with_capacity(dag.sends.len());
    let mut rank_done: Vec<f64> = (0..n as u32).map(entered).collect();
    for (s, path) in dag.sends.iter().zip(&paths) {
        let mut t: f64 = s.prev.map_or(entered(s.from), |p| start[p] + overhead_s);
        for &d in &s.deps {
            t = t.max(done[d]);
        }
        if s.bytes > rendezvous {
            t = t.max(entered(s.to));
        }
        let ser = serialization(topo, path, s.bytes);
        let lat: f64 = path.iter().map(|&d| topo.dir_params(d).latency_s).sum();
        start.push(t);
        // Usable at the receiver: on arrival, or once it has entered and taken it in (without
        // entry times that is always the arrival, which is at least `overhead_s`).
        done.push((t + overhead_s + lat + ser).max(entered(s.to) + overhead_s));
        let from = s.from as usize;
        rank_done[from] = rank_done[from].max(t + overhead_s + ser);
    }
    Ok(CalibratedTimes::from_deliveries(&dag, &done, rank_done))
}

/// What calibrated simulations charge the ranks' CPUs ([`simulate_calibrated`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CpuCosts {
    /// Per message, at its sender and again at its receiver (`sim::SimOptions::send_overhead_s`).
    pub overhead_s: f64,
    /// Before an idle rank takes a message in (`sim::SimOptions::wake_s`).
    pub wake_s: f64,
    /// Ranks that share CPUs (`sim::SimOptions::cpu_pools`).
    pub pools: Option<crate::sim::CpuPools>,
}

/// `plan`'s times for `bytes` on `topo` from the flow simulator ([`crate::sim::simulate_plan`]):
/// links shared max-min fairly between the transfers crossing them, the CPU's costs per message
/// ([`CpuCosts`]), rendezvous above [`RENDEZVOUS_BYTES`](crate::plan::pipeline::RENDEZVOUS_BYTES)
/// (the options the planner ranks plans with). Unlike [`evaluate_calibrated`] it sees a pipeline's
/// segments queue on a link, so it is the one for long messages. A rank leaves the call when
/// its data is in and its sends let it ([`super::send_buffer::leave_times`]): between ranks of
/// different hosts once what has not left fits `send_buffer_bytes` (the transport's buffer,
/// measured at set-up; 0 where unknown), between host-mates once the last byte has left.
/// `buckets`: policed link directions as the call finds them (`super::bucket::Charged`).
pub fn simulate_calibrated(
    topo: &Topology,
    plan: &Plan,
    bytes: u64,
    cpu: &CpuCosts,
    enter: Option<&[f64]>,
    send_buffer_bytes: f64,
    buckets: &[crate::sim::SimBucket],
) -> Result<CalibratedTimes, crate::sim::SimError> {
    let opts = crate::sim::SimOptions {
        send_overhead_s: cpu.overhead_s,
        wake_s: cpu.wake_s,
        cpu_pools: cpu.pools.clone(),
        rendezvous_bytes: Some(crate::plan::pipeline::RENDEZVOUS_BYTES as f64),
        record: true,
        enter_s: enter.map(<[f64]>::to_vec),
        buckets: buckets.to_vec(),
        ..Default::default()
    };
    let r = crate::sim::simulate_plan(topo, plan, bytes, &opts)?;
    let mut rank_done = r.rank_done_s.clone();
    rank_done.resize(plan.nranks as usize, 0.0);
    if let Some(e) = enter {
        for (d, &t) in rank_done.iter_mut().zip(e) {
            *d = d.max(t);
        }
    }
    let apart = |s: u32, d: u32| topo.host_of_rank(s) != topo.host_of_rank(d);
    let held = |s: u32, d: u32| if apart(s, d) { send_buffer_bytes } else { 0.0 };
    let rendezvous = crate::plan::pipeline::RENDEZVOUS_BYTES as f64;
    let leave = super::send_buffer::leave_times(&r.transfers, rank_done.len(), rendezvous, held);
    for (d, l) in rank_done.iter_mut().zip(leave) {
        *d = d.max(l);
    }
    Ok(CalibratedTimes::new(r.rank_done_s, rank_done))
}

/// Relative error of a prediction against a measurement: `predicted / measured - 1` (`None`
/// when the measurement is not positive, or the prediction is zero: a call that sends nothing,
/// whose measured time is the call's own cost, which no model of messages predicts).
pub fn relative_error(predicted_s: f64, measured_s: f64) -> Option<f64> {
    (measured_s > 0.0 && measured_s.is_finite() && predicted_s.is_finite() && predicted_s != 0.0)
        .then(|| predicted_s / measured_s - 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimate::evaluate_deterministic;
    use crate::plan::trees;
    use crate::topology::TopologyBuilder;

    fn one_host(n: u32) -> Topology {
        let mut b = TopologyBuilder::new();
        let h = b.vertex("h", VertexKind::Node);
        for r in 0..n {
            let rv = b.rank(r);
            b.link(rv, h, 0.3e-6, 8e9);
        }
        b.build().unwrap()
    }

    #[test]
    fn two_sizes_give_latency_and_bandwidth() {
        // 8 B in 2 us, 1 MiB in 2 us + 1 MiB / 4 GB/s.
        let (b2, bw) = (1u64 << 20, 4e9);
        let c = fit_path_cost((8, 2e-6 + 8.0 / bw), (b2, 2e-6 + b2 as f64 / bw)).unwrap();
        assert!((c.bandwidth_bps - bw).abs() < 1e-3 * bw, "{c:?}");
        assert!((c.latency_s - 2e-6).abs() < 1e-12, "{c:?}");
        // A large message no slower than the small one: its own rate, all the small time latency.
        let c = fit_path_cost((8, 5e-6), (1000, 4e-6)).unwrap();
        assert_eq!(c.bandwidth_bps, 1000.0 / 4e-6);
        assert!((c.latency_s - (5e-6 - 8.0 / c.bandwidth_bps)).abs() < 1e-15);
        // Never a negative latency: a small message faster than the line through the sizes.
        let c = fit_path_cost((1000, 1e-6), (2000, 10e-6)).unwrap();
        assert_eq!(c.latency_s, 0.0);
        // Unusable readings.
        assert!(fit_path_cost((8, 1e-6), (8, 2e-6)).is_none());
        assert!(fit_path_cost((8, 0.0), (64, 2e-6)).is_none());
        assert!(fit_path_cost((8, f64::NAN), (64, 2e-6)).is_none());
    }

    #[test]
    fn overhead_arithmetic() {
        assert_eq!(overhead_from_burst(16, 32e-6), Some(2e-6));
        assert_eq!(overhead_from_burst(0, 1.0), None);
        assert_eq!(overhead_from_burst(4, -1.0), None);
        let p = PathCost {
            latency_s: 5e-6,
            bandwidth_bps: 1e9,
        };
        assert!((split_overhead(p, 2e-6).latency_s - 3e-6).abs() < 1e-18);
        assert_eq!(split_overhead(p, 9e-6).latency_s, 0.0);
        assert_eq!(relative_error(1.2, 1.0).map(|e| (e * 100.0).round()), Some(20.0));
        assert_eq!(relative_error(1.0, 0.0), None);
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
    }

    #[test]
    fn host_links_take_the_measured_path() {
        let t = one_host(3);
        let c = with_host_links(
            &t,
            PathCost {
                latency_s: 4e-6,
                bandwidth_bps: 2e9,
            },
        );
        let (a, b) = (c.rank_vertex(0), c.rank_vertex(2));
        assert!((c.path_latency(a, b) - 4e-6).abs() < 1e-18);
        assert_eq!(c.path_bandwidth(a, b), 2e9);
        assert_eq!(c.num_ranks(), 3);
    }

    #[test]
    fn calibrated_times_charge_the_overhead_per_send() {
        let t = with_host_links(
            &one_host(4),
            PathCost {
                latency_s: 2e-6,
                bandwidth_bps: 1e9,
            },
        );
        let o = 1e-6;
        let bytes = 1000u64;
        let ser = bytes as f64 / 1e9;
        // Flat tree from 0: its sends leave at 0, o, 2o.
        let plan = Plan::from_tree(0, &trees::flat(4, 0), 1, "flat");
        let c = evaluate_calibrated(&t, &plan, bytes, o, None).unwrap();
        for r in 1..4 {
            let want = (r - 1) as f64 * o + o + 2e-6 + ser;
            assert!((c.rank_arrival_s[r] - want).abs() < 1e-15, "rank {r}: {c:?}");
            assert!((c.rank_done_s[r] - want).abs() < 1e-15);
        }
        // The root leaves once its last buffer is out.
        assert!((c.rank_done_s[0] - (3.0 * o + ser)).abs() < 1e-15, "{c:?}");
        assert!((c.completion_s - (3.0 * o + 2e-6 + ser)).abs() < 1e-15);
        let mid = (c.rank_done_s[1] + c.rank_done_s[2]) / 2.0;
        assert!((c.rank_median_s - mid).abs() < 1e-15);
        // Rank 3 enters 50 us late: its data has waited; it takes it in with one overhead.
        // The root enters at 5 us: its sends leave from then on.
        let late = evaluate_calibrated(&t, &plan, bytes, o, Some(&[5e-6, 0.0, 0.0, 50e-6])).unwrap();
        assert!((late.rank_done_s[3] - (50e-6 + o)).abs() < 1e-15, "{late:?}");
        assert!(
            (late.rank_done_s[1] - (5e-6 + o + 2e-6 + ser)).abs() < 1e-15,
            "{late:?}"
        );
        assert!(evaluate_calibrated(&t, &plan, bytes, o, Some(&[0.0; 3])).is_err());
        // A rendezvous-sized message waits for its receiver's entry before it leaves.
        let big = 1u64 << 20;
        let late = evaluate_calibrated(&t, &plan, big, o, Some(&[0.0, 0.0, 0.0, 50e-6])).unwrap();
        let want = 50e-6 + o + 2e-6 + big as f64 / 1e9;
        assert!((late.rank_done_s[3] - want).abs() < 1e-12, "{late:?}");
        // The flow simulator agrees where nothing shares a link: one send, one receiver.
        let pair = Plan::from_tree(0, &trees::flat(2, 0), 1, "flat");
        let two = with_host_links(
            &one_host(2),
            PathCost {
                latency_s: 2e-6,
                bandwidth_bps: 1e9,
            },
        );
        let s = simulate_calibrated(&two, &pair, bytes, &CpuCosts::default(), None, 0.0, &[]).unwrap();
        let e = evaluate_calibrated(&two, &pair, bytes, 0.0, None).unwrap();
        assert!((s.rank_arrival_s[1] - e.rank_arrival_s[1]).abs() < 1e-9, "{s:?} {e:?}");
        // A pipelined chain's segments queue on each link in the simulator: 8 segments of a
        // 1 MB message take at least 1 MB / bandwidth, where the contention-free evaluator
        // streams them all at once.
        let chain = Plan::from_tree(0, &trees::rank_chain(4, 0), 8, "chain");
        let big = 1_000_000u64;
        let s = simulate_calibrated(&t, &chain, big, &CpuCosts::default(), None, 0.0, &[]).unwrap();
        assert!(s.rank_arrival_s[1] >= big as f64 / 1e9, "{s:?}");
        let e = evaluate_calibrated(&t, &chain, big, 0.0, None).unwrap();
        assert!(e.rank_arrival_s[1] < 0.5 * big as f64 / 1e9, "{e:?}");
        // Without overhead the arrivals are the contention-free evaluator's.
        let d = evaluate_deterministic(&t, &plan, bytes).unwrap();
        let z = evaluate_calibrated(&t, &plan, bytes, 0.0, None).unwrap();
        assert_eq!(z.rank_arrival_s, d.rank_arrival_s);
    }

    #[test]
    fn a_sender_across_hosts_leaves_once_its_transport_holds_the_rest() {
        // Ranks 0 and 1 on host a, rank 2 on host b, the hosts 100 MB/s apart.
        let mut b = TopologyBuilder::new();
        let sw = b.vertex("sw", VertexKind::Switch);
        let ha = b.vertex("a", VertexKind::Node);
        let hb = b.vertex("b", VertexKind::Node);
        b.link(ha, sw, 1e-6, 1e8);
        b.link(hb, sw, 1e-6, 1e8);
        for (r, h) in [(0, ha), (1, ha), (2, hb)] {
            let rv = b.rank(r);
            b.link(rv, h, 0.1e-6, 1e10);
        }
        let t = b.build().unwrap();
        let plan = Plan::from_tree(0, &trees::flat(3, 0), 1, "flat");
        let bytes = 1_000_000u64;
        let run = |held: f64| simulate_calibrated(&t, &plan, bytes, &CpuCosts::default(), None, held, &[]).unwrap();
        let (none, part, whole) = (run(0.0), run(400e3), run(2e6));
        // Unbuffered, the root stays until its last byte has crossed to host b (10 ms).
        assert!(none.rank_done_s[0] >= 0.01, "{none:?}");
        // 400 KB held: it leaves once 600 KB have crossed, at 6 ms and some latency.
        assert!((part.rank_done_s[0] - 0.006).abs() < 1e-4, "{part:?}");
        // Held whole: once the handshake lets the data go (the host-mate's copy at 10 GB/s,
        // 0.1 ms, is then the last thing it waits for).
        assert!(whole.rank_done_s[0] < 0.2e-3, "{whole:?}");
        // The receivers are as before, whatever the root's transport holds.
        for r in [1, 2] {
            assert_eq!(none.rank_done_s[r], whole.rank_done_s[r]);
            assert_eq!(none.rank_arrival_s[r], part.rank_arrival_s[r]);
        }
    }
}
